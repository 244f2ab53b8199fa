package engine

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// roles resolves a scenario's roles against the live cluster, with the
// scenario's random source for every pick.
type roles struct {
	e         *Engine
	namespace string
	defs      map[string]scenario.Role
	rng       *rand.Rand
	// owner is the resource under test, whose pods an owned role picks.
	owner metav1.Object
}

// pods resolves a role of pods on its own (see snapshot).
func (r *roles) pods(ctx context.Context, name string) (chaosmesh.Pods, error) {
	return r.snapshot().pods(ctx, name)
}

// snapshot is one moment's resolution: within it a role is resolved once,
// so that the leader a fault targets is the leader its peer excludes, even
// when the role is a random pick.
func (r *roles) snapshot() *resolution {
	return &resolution{roles: r, memo: map[string]chaosmesh.Pods{}}
}

type resolution struct {
	*roles
	memo map[string]chaosmesh.Pods
}

// pods resolves a role of pods: its namespace and pod names, sorted.
func (r *resolution) pods(ctx context.Context, name string) (chaosmesh.Pods, error) {
	if p, ok := r.memo[name]; ok {
		return chaosmesh.Pods{Namespace: p.Namespace, Names: slices.Clone(p.Names)}, nil
	}
	p, err := r.resolve(ctx, name)
	if err == nil {
		r.memo[name] = chaosmesh.Pods{Namespace: p.Namespace, Names: slices.Clone(p.Names)}
	}
	return p, err
}

func (r *resolution) resolve(ctx context.Context, name string) (chaosmesh.Pods, error) {
	def, ok := r.defs[name]
	if !ok {
		return chaosmesh.Pods{}, fmt.Errorf("no role %q", name)
	}
	if def.APIServer {
		return chaosmesh.Pods{}, fmt.Errorf("role %q is the API server's addresses, not pods", name)
	}
	base, err := r.base(ctx, def)
	if err != nil {
		return base, err
	}
	slices.Sort(base.Names)
	whole := len(base.Names)
	out := chaosmesh.Pods{Namespace: base.Namespace, Names: slices.Clone(base.Names)}
	if def.Probe != nil {
		kept, err := r.probe(ctx, name, out, def.Probe)
		if err != nil {
			return out, err
		}
		out.Names = kept
	}
	for _, ex := range def.Exclude {
		other, err := r.pods(ctx, ex)
		if err != nil {
			return out, fmt.Errorf("role %s excludes %s: %w", name, ex, err)
		}
		out.Names = slices.DeleteFunc(out.Names, func(p string) bool { return slices.Contains(other.Names, p) })
	}
	n := len(out.Names)
	switch def.Pick {
	case "", "all":
	case "one":
		n = min(n, 1)
	case "minority":
		n = min(n, (whole-1)/2)
	default:
		k, err := strconv.Atoi(def.Pick)
		if err != nil {
			return out, fmt.Errorf("role %s: pick %q", name, def.Pick)
		}
		n = min(n, k)
	}
	r.rng.Shuffle(len(out.Names), func(i, j int) { out.Names[i], out.Names[j] = out.Names[j], out.Names[i] })
	out.Names = out.Names[:n]
	slices.Sort(out.Names)
	if len(out.Names) == 0 {
		if whole == 0 && len(def.Pods) > 0 {
			return out, fmt.Errorf("role %s: no pod in %s has the labels %s%s", name, r.namespace, labels.Set(def.Pods), r.podLabels(ctx))
		}
		if whole == 0 && def.Owned {
			return out, fmt.Errorf("role %s: no pod in %s is owned by the resource under test (no chain of controller references leads to it)", name, r.namespace)
		}
		return out, fmt.Errorf("role %s has no pod (of %d in %s)", name, whole, base.Namespace)
	}
	return out, nil
}

// base is the pods a role starts from, before its probe, exclusions and
// pick: the operator's running pods, the resource's namespace's by label or
// ownership, or another role's.
func (r *resolution) base(ctx context.Context, def scenario.Role) (chaosmesh.Pods, error) {
	var base chaosmesh.Pods
	switch {
	case def.Operator:
		pods, err := r.e.operatorPods(ctx)
		if err != nil {
			return base, err
		}
		base.Namespace = r.e.operator.Namespace
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				base.Names = append(base.Names, p.Name)
			}
		}
	case def.Owned:
		names, err := r.ownedPods(ctx)
		if err != nil {
			return base, err
		}
		base = chaosmesh.Pods{Namespace: r.namespace, Names: names}
	case len(def.Pods) > 0:
		list := &corev1.PodList{}
		if err := r.e.Client.List(ctx, list, client.InNamespace(r.namespace), client.MatchingLabels(def.Pods)); err != nil {
			return base, err
		}
		base.Namespace = r.namespace
		for _, p := range list.Items {
			if p.DeletionTimestamp.IsZero() {
				base.Names = append(base.Names, p.Name)
			}
		}
	default:
		var err error
		if base, err = r.pods(ctx, def.From); err != nil {
			return base, err
		}
	}
	return base, nil
}

// podLabels lists the namespace's pods with their labels, for a role that
// selects none of them.
func (r *resolution) podLabels(ctx context.Context) string {
	list := &corev1.PodList{}
	if err := r.e.Client.List(ctx, list, client.InNamespace(r.namespace)); err != nil || len(list.Items) == 0 {
		return " (it has no pod)"
	}
	var pods []string
	for _, p := range list.Items {
		pods = append(pods, fmt.Sprintf("%s: %s", p.Name, labels.Set(p.Labels)))
	}
	slices.Sort(pods)
	return " (its pods: " + strings.Join(pods, "; ") + ")"
}

// probe keeps the pods whose answer contains what the probe expects,
// asking until at least one does (a leader may be being elected).
func (r *roles) probe(ctx context.Context, role string, pods chaosmesh.Pods, p *scenario.Probe) ([]string, error) {
	var kept []string
	what := fmt.Sprintf("a pod of role %s whose :%d%s contains %q", role, p.Port, p.Path, p.Contains)
	if p.Exec != nil {
		what = fmt.Sprintf("a pod of role %s where %v prints %q", role, p.Exec.Command, p.Contains)
	}
	err := framework.PollFor(ctx, what, probeWithin, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		kept = nil
		var seen []string
		for _, name := range pods.Names {
			var body string
			var err error
			if p.Exec != nil {
				ectx, cancel := context.WithTimeout(ctx, probeExecWithin)
				var res framework.ExecResult
				res, err = framework.Exec(ectx, r.e.Config, pods.Namespace, name, p.Exec.Container, p.Exec.Command...)
				body = res.Stdout
				cancel()
			} else {
				body, err = r.get(ctx, pods.Namespace, name, int(p.Port), p.Path)
			}
			switch {
			case err != nil:
				seen = append(seen, fmt.Sprintf("%s: %v", name, err))
			case strings.Contains(body, p.Contains):
				kept = append(kept, name)
			default:
				seen = append(seen, name+": no")
			}
		}
		return len(kept) > 0, strings.Join(seen, "; "), nil
	})
	return kept, err
}

// A role's probe: each pod asked answers within probeGetWithin (an HTTP
// GET through a port-forward) or probeExecWithin (a command, which starts
// a process), and some pod answers as expected within probeWithin (an
// election after a fault takes seconds).
const (
	probeWithin     = time.Minute
	probeGetWithin  = 3 * time.Second
	probeExecWithin = 5 * time.Second
)

// get fetches path from a pod's port through a port-forward.
func (r *roles) get(ctx context.Context, ns, pod string, port int, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeGetWithin)
	defer cancel()
	pf, err := framework.ForwardPort(ctx, r.e.Config, ns, pod, port)
	if err != nil {
		return "", err
	}
	defer pf.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", pf.Local, path), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b), err
}

// apiServerAddresses are the API server's Service IP and endpoint IPs:
// what a pod dials to reach it.
func (r *roles) apiServerAddresses(ctx context.Context) ([]string, error) {
	svc := &corev1.Service{}
	if err := r.e.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc); err != nil {
		return nil, err
	}
	addrs := slices.Clone(svc.Spec.ClusterIPs)
	slices := &discoveryv1.EndpointSliceList{}
	if err := r.e.Client.List(ctx, slices, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, err
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			addrs = append(addrs, ep.Addresses...)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no address for the API server")
	}
	return addrs, nil
}
