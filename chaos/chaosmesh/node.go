package chaosmesh

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// The kernel probes run in a scratch network namespace inside a chaos-daemon
// pod, which has the same tools Chaos Mesh uses (tc, ipset, iptables) and
// shares its node's kernel with the target pods.
var featureProbes = map[Feature]string{
	Netem: "tc qdisc add dev lo root netem delay 1ms",
	TBF:   "tc qdisc add dev lo root tbf rate 1mbit burst 32kbit latency 400ms",
	IPSet: "ipset create gauntlet_probe hash:net && iptables -w -A INPUT -m set --match-set gauntlet_probe src -j DROP",
}

// Features reports, for each feature the runner knows, nil when the
// kernel of the node running the first chaos-daemon pod offers it and the
// probe's error otherwise. Results are cached for the runner's life.
func (r *Runner) Features(ctx context.Context) (map[Feature]error, error) {
	r.defaults()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.features != nil {
		return r.features, nil
	}
	daemons, err := r.daemons(ctx)
	if err != nil {
		return nil, err
	}
	var d *corev1.Pod
	for _, p := range daemons {
		d = p
		break
	}
	out := map[Feature]error{}
	for f, probe := range featureProbes {
		_, err := framework.Exec(ctx, r.Config, d.Namespace, d.Name, "", "unshare", "-n", "sh", "-ec", "ip link set lo up; "+probe)
		out[f] = err
	}
	r.features = out
	return out, nil
}

// Missing returns why a fault that needs these features cannot run on
// this cluster's nodes, or "" when it can.
func (r *Runner) Missing(ctx context.Context, needs []Feature) string {
	if len(needs) == 0 {
		return ""
	}
	if r.Unavailable != "" {
		return r.Unavailable
	}
	fs, err := r.Features(ctx)
	if err != nil {
		return fmt.Sprintf("cannot probe the kernel: %v", err)
	}
	var missing []string
	for _, f := range needs {
		if err := fs[f]; err != nil {
			missing = append(missing, fmt.Sprintf("the node kernel lacks %s (%s)", f, probeAnswer(err)))
		}
	}
	return strings.Join(missing, "; ")
}

// daemons maps node names to the running chaos-daemon pod on them.
func (r *Runner) daemons(ctx context.Context) (map[string]*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.ChaosNamespace), client.MatchingLabels(r.DaemonLabels)); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
			out[p.Spec.NodeName] = p
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no running chaos-daemon pod in %s (labels %v, %d pods)", r.ChaosNamespace, r.DaemonLabels, len(pods.Items))
	}
	return out, nil
}

// NetworkRules inspects the network namespace of every target pod still
// running, from the chaos-daemon on its node. An active rule is a rule in
// Chaos Mesh's CHAOS-INPUT or CHAOS-OUTPUT chain (what would still drop
// traffic); leftovers are the unreferenced per-experiment chains and the
// ipsets Chaos Mesh leaves by design until the pod goes.
func (r *Runner) NetworkRules(ctx context.Context, targets []Pods) (leftovers, active []string, err error) {
	daemons, err := r.daemons(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range targets {
		for _, name := range t.Names {
			pod := &corev1.Pod{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, pod); err != nil {
				return leftovers, active, fmt.Errorf("pod %s/%s: %w", t.Namespace, name, err)
			}
			d := daemons[pod.Spec.NodeName]
			if d == nil || len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].ContainerID == "" {
				return leftovers, active, fmt.Errorf("pod %s/%s: no running container or no chaos-daemon on node %q", t.Namespace, name, pod.Spec.NodeName)
			}
			_, id, _ := strings.Cut(pod.Status.ContainerStatuses[0].ContainerID, "://")
			// Find a process of the container through its cgroup, then
			// read the rules in its network namespace.
			script := `pid=$(grep -l ` + id + ` /proc/[0-9]*/cgroup 2>/dev/null | head -1 | cut -d/ -f3)
[ -n "$pid" ] || { echo "no process of container ` + id + `" >&2; exit 1; }
for c in CHAOS-INPUT CHAOS-OUTPUT; do nsenter -t "$pid" -n iptables -w -S "$c" 2>/dev/null | sed "s/^/active /"; done
nsenter -t "$pid" -n iptables -w -S | grep -- '^-N ' | grep -v -- '-N CHAOS-' | sed 's/^-N /chain /'
nsenter -t "$pid" -n ipset list -n | sed 's/^/ipset /'`
			res, err := framework.Exec(ctx, r.Config, d.Namespace, d.Name, "", "sh", "-c", script)
			if err != nil {
				return leftovers, active, err
			}
			for line := range strings.Lines(res.Stdout) {
				line = strings.TrimSpace(line)
				switch {
				case strings.HasPrefix(line, "active -A "):
					active = append(active, fmt.Sprintf("%s/%s: %s", t.Namespace, name, strings.TrimPrefix(line, "active ")))
				case strings.HasPrefix(line, "chain "), strings.HasPrefix(line, "ipset "):
					leftovers = append(leftovers, fmt.Sprintf("%s/%s: %s", t.Namespace, name, line))
				}
			}
		}
	}
	slices.Sort(leftovers)
	return leftovers, active, nil
}

// probeAnswer is the last line of a failed probe's output: the kernel's
// own words, without the shell's preamble.
func probeAnswer(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
