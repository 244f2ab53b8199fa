package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/workload"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// RunOptions select and shape a run of the set.
type RunOptions struct {
	// Seed drives every choice; scenario i gets ScenarioSeed(Seed, i).
	Seed uint64
	// Seeds pins the seed of named scenarios (a replay).
	Seeds map[string]uint64
	// Only selects scenarios by name (all when empty).
	Only []string
	// Artifacts is the run's folder.
	Artifacts string
}

// ScenarioSeed derives the seed of the i-th scenario from the run's.
func ScenarioSeed(seed uint64, i int) uint64 { return seed*1_000_003 + uint64(i) }

// defaultBaseline is how long the etcd-kv workload runs before the fault
// is requested, to measure its fault-free rate.
const defaultBaseline = 10 * time.Second

// writeStall is the shortest stretch without an acknowledged write that
// counts as writes having stopped: longer than one failover of the
// workload's clients (a 750 ms timeout on a member being replaced, then the
// next member), so that a client moving on is not taken for etcd stopping.
const writeStall = 2 * time.Second

// RunAll runs the selected scenarios in turn, writing the report (json,
// junit, summary, html) after each.
func (e *Engine) RunAll(ctx context.Context, o RunOptions) (*report.Report, error) {
	rep := report.NewReport(o.Seed, e.Cluster.Name)
	for i, s := range e.o.Set.Scenarios {
		if len(o.Only) > 0 && !slices.Contains(o.Only, s.Metadata.Name) {
			continue
		}
		seed, pinned := o.Seeds[s.Metadata.Name]
		if !pinned {
			seed = ScenarioSeed(o.Seed, i)
		}
		res := e.Run(ctx, s, seed, o.Artifacts)
		rep.Results = append(rep.Results, res)
		e.logf("%s: %s in %s", s.Metadata.Name, res.Verdict(), res.Took.Round(time.Second))
		if err := write(rep, o.Artifacts); err != nil {
			return rep, err
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, write(rep, o.Artifacts)
}

func write(rep *report.Report, dir string) error {
	if err := rep.Write(dir); err != nil {
		return err
	}
	_, err := htmlreport.Write(rep, dir)
	return err
}

// needs are the kernel features an action relies on: those of the
// experiment the builder makes for it (no pod needed to ask).
func needs(action string) []Feature {
	exp, err := build("needs", scenario.Fault{Action: action}, Pods{}, Pods{}, nil)
	if err != nil {
		return nil
	}
	return exp.Needs
}

// run is one scenario's live state.
type run struct {
	e     *Engine
	s     *scenario.Scenario
	vars  Vars
	ns    string
	gvr   schema.GroupVersionResource
	obj   *unstructured.Unstructured
	roles *roles
	// faultRoles is the resolution the fault's targets came from; the
	// workload command's role is resolved in it too, so that "a pod the
	// fault spares" means the fault's own choice.
	faultRoles *resolution
	// targets are the pods the fault was aimed at.
	targets []Pods
	command chan commandResult
	kv      workload.KV
	res     *report.Result
	closer  []func()
}

func (r *run) fail(format string, args ...any) *report.Result {
	r.res.Errors = append(r.res.Errors, fmt.Sprintf(format, args...))
	return r.res
}

// Run runs one scenario on a fresh resource and judges it.
func (e *Engine) Run(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) *report.Result {
	start := time.Now()
	name := s.Metadata.Name
	r := &run{e: e, s: s, vars: Vars{Overrides: e.o.Overrides, Defaults: s.Spec.Variables},
		res: &report.Result{Run: &report.Run{Scenario: name, Seed: seed}, Artifacts: filepath.Join(artifacts, name)}}
	defer func() { r.res.Took = time.Since(start) }()
	if why := e.Runner.Missing(ctx, needs(s.Spec.Fault.Action)); why != "" {
		r.res.Skipped = why
		e.logf("%s: skipped before creating anything: %s", name, why)
		return r.res
	}
	defer r.cleanup(ctx)
	if err := r.create(ctx); err != nil {
		return r.fail("creating the resource: %v", err)
	}
	if err := r.waitConverged(ctx); err != nil {
		return r.fail("%v", err)
	}
	e.logf("%s: %s %s/%s converged in %s", name, r.obj.GetKind(), r.ns, r.obj.GetName(), time.Since(start).Round(time.Second))
	r.roles = &roles{e: e, namespace: r.ns, defs: s.Spec.Roles, rng: rand.New(rand.NewPCG(seed, 2))}

	before, err := r.operatorState(ctx)
	if err != nil {
		return r.fail("reading the operator before the fault: %v", err)
	}
	tctx, stopTimeline := context.WithCancel(ctx)
	defer stopTimeline()
	timeline := WatchConditions(tctx, e.Dynamic, r.gvr, r.ns, r.obj.GetName())

	var load *workload.Workload
	if w := s.Spec.Workload; w != nil && w.Kind == scenario.WorkloadEtcdKV {
		if load, err = r.startEtcdKV(ctx, w, seed); err != nil {
			return r.fail("starting the workload: %v", err)
		}
		if err := r.baseline(ctx, w); err != nil {
			return r.fail("%v", err)
		}
	}
	if w := s.Spec.Workload; w != nil && w.Kind == scenario.WorkloadCommand {
		r.command = make(chan commandResult, 1) // started by during, once the fault's targets are known
	}
	obs := &Observer{Pods: r.watchedPods}
	if m := e.operator.Metrics; m != nil {
		obs.Scrape, obs.Controller = r.scrapeOperator, m.Controller
	}
	obs.Start(ctx)

	f := s.Spec.Fault
	rng := rand.New(rand.NewPCG(seed, 1))
	runRes := e.Runner.Run(ctx, Trial{
		Name: name,
		Hold: f.Hold.Duration,
		Fault: func(ctx context.Context, _ *rand.Rand) (*Experiment, error) {
			return r.experiment(ctx, f)
		},
		During:    func(ctx context.Context) error { return r.during(ctx, rng) },
		Converged: r.waitConverged,
	}, seed)
	r.res.Run = runRes
	var ledger *workload.Ledger
	if load != nil {
		ledger = load.Stop()
	}
	stopTimeline()
	r.res.Timeline = timeline.Samples()
	r.res.Series = &report.Series{}
	if ledger != nil {
		r.res.Series.SetWorkload(ledger)
	}
	r.res.Series.Operator, r.res.Series.Pods = obs.Stop()
	for _, err := range timeline.Errors() {
		r.res.Errors = append(r.res.Errors, "the condition timeline is incomplete: its watch failed: "+err)
	}
	if runRes.Skipped != "" || runRes.Failed() {
		if ledger != nil {
			_, _ = ledger.Save(r.res.Artifacts)
		}
		return r.res
	}
	if r.command != nil {
		r.res.Checks = append(r.res.Checks, (<-r.command).check())
	}
	if err := r.judge(ctx, timeline, ledger, before); err != nil {
		return r.fail("%v", err)
	}
	r.res.Violations = append(r.res.Violations, report.Violations(r.res.Checks)...)
	if len(r.res.Violations) > 0 && ledger != nil {
		_, _ = ledger.Save(r.res.Artifacts)
	}
	e.logf("%s: %d checks, %d violated", name, len(r.res.Checks), len(r.res.Violations))
	return r.res
}

// create makes the namespace and the resource, retrying while the
// operator's webhook cannot be reached yet.
func (r *run) create(ctx context.Context) error {
	// On an existing cluster an earlier run's namespace of the same name
	// may still be terminating: take the next sequence number.
	for attempt := 0; ; attempt++ {
		r.e.seq++
		r.ns = fmt.Sprintf("chaos-%s-%d", r.s.Metadata.Name, r.e.seq)
		if len(r.ns) > 63 {
			r.ns = strings.TrimRight(r.ns[:63], "-")
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}}
		err := r.e.Client.Create(ctx, ns)
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) || attempt == 20 {
			r.ns = ""
			return err
		}
	}
	objs, err := readObjects(filepath.Join(filepath.Dir(r.e.o.Set.Files[r.s.Metadata.Name]), r.s.Spec.Resource.Manifest), r.vars)
	if err != nil {
		return err
	}
	if len(objs) != 1 {
		return fmt.Errorf("%s holds %d objects, want 1", r.s.Spec.Resource.Manifest, len(objs))
	}
	r.obj = objs[0]
	r.obj.SetNamespace(r.ns)
	gvk := r.obj.GroupVersionKind()
	return framework.PollFor(ctx, "the API server to accept "+gvk.Kind+" "+r.obj.GetName(), 2*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		// The API server's discovery may lag a moment behind a CRD the
		// operator's deployment just established: look again until it serves.
		m, err := r.e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			r.e.Mapper.Reset()
			return false, fmt.Sprintf("the cluster does not serve %s yet: %v", gvk, err), nil
		}
		if err != nil {
			return false, "", fmt.Errorf("mapping %s to a resource: %w", gvk, err)
		}
		r.gvr = m.Resource
		created, err := r.resource().Create(ctx, r.obj, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		r.obj = created
		return true, "", nil
	})
}

func (r *run) resource() dynamic.ResourceInterface {
	return r.e.Dynamic.Resource(r.gvr).Namespace(r.ns)
}

// waitConverged waits until every converged expression holds.
func (r *run) waitConverged(ctx context.Context) error {
	progs, err := compile(r.s.Spec.Resource.Converged)
	if err != nil {
		return err
	}
	within := r.s.Spec.Resource.ConvergeWithin.Duration
	if within == 0 {
		within = 5 * time.Minute
	}
	return framework.PollFor(ctx, r.obj.GetName()+" to converge", within, time.Second, func(ctx context.Context) (bool, string, error) {
		u, err := r.resource().Get(ctx, r.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		r.obj = u
		for i, p := range progs {
			ok, err := p.eval(u.Object)
			if err != nil || !ok {
				return false, fmt.Sprintf("converged[%d] %q is %v (%v); status %s", i, p.src, ok, err, statusOf(u)), nil
			}
		}
		if all := r.s.Spec.Resource.AllPodsReady; all != nil && !*all {
			return true, "", nil
		}
		pods := &corev1.PodList{}
		if err := r.e.Client.List(ctx, pods, client.InNamespace(r.ns)); err != nil {
			return false, err.Error(), nil
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !p.DeletionTimestamp.IsZero() || !framework.PodReady(p) {
				return false, fmt.Sprintf("pod %s ready %v, terminating %v (phase %s)", p.Name, framework.PodReady(p), !p.DeletionTimestamp.IsZero(), p.Status.Phase), nil
			}
		}
		return true, "", nil
	})
}

func statusOf(u *unstructured.Unstructured) string {
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	b, _ := json.Marshal(st)
	return string(b)
}

// experiment builds the fault on the roles' pods as they are now.
func (r *run) experiment(ctx context.Context, f scenario.Fault) (*Experiment, error) {
	roles := r.roles.snapshot()
	r.faultRoles = roles
	target, err := roles.pods(ctx, f.Target)
	if err != nil {
		return nil, err
	}
	var peer Pods
	var addrs []string
	if f.Action == scenario.ActionPartition {
		if r.s.Spec.Roles[f.Peer].APIServer {
			addrs, err = r.roles.apiServerAddresses(ctx)
		} else {
			peer, err = roles.pods(ctx, f.Peer)
		}
		if err != nil {
			return nil, err
		}
	}
	var exp *Experiment
	if f.Action == scenario.ActionNodeLoss {
		exp, err = r.nodeLoss(ctx, target)
	} else {
		exp, err = build(r.s.Metadata.Name, f, target, peer, addrs)
	}
	if err == nil {
		r.targets = exp.Targets
	}
	return exp, err
}

// nodeLoss stops the nodes the target pods run on for the hold, then
// starts them again. Only the nodes of a kind cluster the harness made are
// its to stop, and never a control plane (the API server would go too):
// on the single-node cluster the scenario is skipped.
func (r *run) nodeLoss(ctx context.Context, target Pods) (*Experiment, error) {
	if r.e.Cluster == nil || r.e.Cluster.Existing {
		return nil, Skip("node-loss stops a kind node's container: it needs a kind cluster the harness created, not an existing cluster")
	}
	var nodes []string
	for _, name := range target.Names {
		var p corev1.Pod
		if err := r.e.Client.Get(ctx, client.ObjectKey{Namespace: target.Namespace, Name: name}, &p); err != nil {
			return nil, err
		}
		var n corev1.Node
		if err := r.e.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n); err != nil {
			return nil, fmt.Errorf("the node of pod %s: %w", name, err)
		}
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; cp {
			return nil, Skip(fmt.Sprintf("node-loss needs the target on a worker node, and %s runs on the control plane %s: run on the multi-node cluster (--multi-node, MULTI_NODE=1)", name, n.Name))
		}
		if !slices.Contains(nodes, n.Name) {
			nodes = append(nodes, n.Name)
		}
	}
	cl := r.e.Cluster
	return &Experiment{
		Targets: []Pods{target},
		Harness: &HarnessFault{
			Name: r.s.Metadata.Name,
			Kind: "Node/stop",
			Inject: func(ctx context.Context) error {
				for _, n := range nodes {
					if err := cl.StopNode(ctx, n); err != nil {
						return err
					}
				}
				return nil
			},
			Recover: func(ctx context.Context) error {
				var errs []error
				for _, n := range nodes {
					errs = append(errs, cl.StartNode(ctx, n))
				}
				return errors.Join(errs...)
			},
		},
	}, nil
}

// build makes the experiment of a fault on resolved targets: a partition
// cuts target off from peer's pods, or from addrs when they are given.
func build(name string, f scenario.Fault, target, peer Pods, addrs []string) (*Experiment, error) {
	switch f.Action {
	case scenario.ActionPodKill:
		return PodKill(name, target), nil
	case scenario.ActionContainerKill:
		return ContainerKill(name, target, f.Container), nil
	case scenario.ActionPodFailure:
		return PodFailure(name, target, 10*time.Minute), nil
	case scenario.ActionBandwidth:
		return Bandwidth(name, target, f.Rate), nil
	case scenario.ActionDelay:
		return Delay(name, target, f.Latency.Duration), nil
	case scenario.ActionLoss:
		return Loss(name, target, f.LossPercent), nil
	case scenario.ActionPartition:
		if addrs != nil {
			return PartitionFrom(name, target, addrs...), nil
		}
		return Partition(name, target, peer), nil
	}
	return nil, fmt.Errorf("unknown action %q", f.Action)
}

// during takes the scenario's actions in order.
func (r *run) during(ctx context.Context, _ *rand.Rand) error {
	if r.command != nil {
		r.startCommand(ctx, r.s.Spec.Workload.Command)
	}
	for i, a := range r.s.Spec.During {
		switch {
		case a.Patch != nil:
			raw, err := json.Marshal(a.Patch)
			if err != nil {
				return err
			}
			patch := []byte(r.vars.Expand(string(raw)))
			err = framework.PollFor(ctx, fmt.Sprintf("the API server to accept during[%d]'s patch", i), 3*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
				if _, err := r.resource().Patch(ctx, r.obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					return false, err.Error(), nil
				}
				return true, "", nil
			})
			if err != nil {
				return err
			}
		case a.DeletePods != nil:
			pods, err := r.roles.pods(ctx, a.DeletePods.Role)
			if err != nil {
				return err
			}
			for _, name := range pods.Names {
				if err := r.deletePod(ctx, pods.Namespace, name, a.DeletePods.WithClaims); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// deletePod deletes a pod, and first its claims when asked, so that it
// comes back with an empty volume.
func (r *run) deletePod(ctx context.Context, ns, name string, claims bool) error {
	p := &corev1.Pod{}
	if err := r.e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	var errs []error
	if claims {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v.PersistentVolumeClaim.ClaimName}}
				errs = append(errs, client.IgnoreNotFound(r.e.Client.Delete(ctx, pvc)))
			}
		}
	}
	errs = append(errs, client.IgnoreNotFound(r.e.Client.Delete(ctx, p)))
	return errors.Join(errs...)
}

// workloadOpTimeout bounds one workload operation: well above a healthy
// write here (tens of milliseconds), well under etcd's failover time.
const workloadOpTimeout = 750 * time.Millisecond

// baseline lets the workload run fault-free for the scenario's baseline
// before the fault is requested: its rate there is what the operations
// during the fault are compared with.
func (r *run) baseline(ctx context.Context, w *scenario.Workload) error {
	d := defaultBaseline
	if w.Baseline != nil {
		d = w.Baseline.Duration
	}
	r.e.logf("%s: workload running fault-free for %s (baseline)", r.s.Metadata.Name, d)
	select {
	case <-ctx.Done():
		return fmt.Errorf("interrupted during the workload's baseline: %w", ctx.Err())
	case <-time.After(d):
		return nil
	}
}

// startEtcdKV opens a tunnel to each pod of the endpoints role and starts
// the key-value workload through them.
func (r *run) startEtcdKV(ctx context.Context, w *scenario.Workload, seed uint64) (*workload.Workload, error) {
	pods, err := r.roles.pods(ctx, w.Endpoints.Role)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.closer = append(r.closer, cancel)
	var endpoints []string
	for _, p := range pods.Names {
		t, err := framework.OpenTunnel(tctx, r.e.Config, pods.Namespace, p, int(w.Endpoints.Port))
		if err != nil {
			return nil, err
		}
		endpoints = append(endpoints, t.Addr)
	}
	// One client per member, failing over between them like an etcd client
	// with every endpoint: a member cut off from the leader refuses at once
	// (RequireLeader) or times out within OpTimeout, and is then avoided for
	// a second, doubling up to 8 s while it keeps failing and probed by one
	// operation at a time, so the workload measures etcd, not its own
	// waiting.
	var replicas []workload.KV
	for _, ep := range endpoints {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second})
		if err != nil {
			return nil, err
		}
		r.closer = append(r.closer, func() { _ = cli.Close() })
		replicas = append(replicas, workload.EtcdKV{Client: cli, RequireLeader: true})
	}
	kv := &workload.Failover{Replicas: replicas, Backoff: time.Second, MaxBackoff: 8 * time.Second}
	load := workload.Start(ctx, kv, workload.Config{Clients: w.Clients, Keys: w.Keys, Seed: seed,
		OpTimeout: workloadOpTimeout, Prefix: "gauntlet/chaos/" + r.s.Metadata.Name + "/"})
	r.closer = append(r.closer, func() { load.Stop() })
	err = framework.PollFor(ctx, "the workload's first acknowledged writes", time.Minute, 100*time.Millisecond, func(context.Context) (bool, string, error) {
		n, last := 0, ""
		for _, op := range load.Snapshot() {
			if op.Kind == workload.KindPut && op.Outcome == workload.OK {
				n++
			}
			last = op.Error
		}
		return n >= 20, fmt.Sprintf("%d acknowledged writes, last error %q", n, last), nil
	})
	if err != nil {
		return nil, err
	}
	r.kv = kv
	return load, nil
}

// watchedPods are the resource's namespace's pods and the operator's.
func (r *run) watchedPods(ctx context.Context) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.e.Client.List(ctx, list, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	ops, err := r.e.operatorPods(ctx)
	return append(list.Items, ops...), err
}

// cleanup collects a bundle when the scenario failed, closes the workload,
// deletes the resource and waits until it is gone, then the namespace.
func (r *run) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*time.Minute)
	defer cancel()
	for i := len(r.closer) - 1; i >= 0; i-- {
		r.closer[i]()
	}
	if r.res.Verdict() == report.Failed && r.ns != "" {
		_ = os.MkdirAll(r.res.Artifacts, 0o755)
		if err := framework.CollectBundle(ctx, r.res.Artifacts, framework.BundleOptions{
			Config: r.e.Config, Namespaces: []string{r.ns, r.e.operator.Namespace, r.e.Runner.ChaosNamespace}, Logs: r.e.Cluster.BundleLogs(),
		}); err != nil {
			r.e.logf("%s: bundle incomplete: %v", r.s.Metadata.Name, err)
		}
	}
	if r.obj != nil && r.obj.GetUID() != "" {
		_ = r.resource().Delete(ctx, r.obj.GetName(), metav1.DeleteOptions{})
		err := framework.PollFor(ctx, r.obj.GetKind()+" "+r.ns+"/"+r.obj.GetName()+" to be deleted", 3*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
			_, err := r.resource().Get(ctx, r.obj.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		})
		if err != nil {
			r.res.Errors = append(r.res.Errors, "cleanup: "+err.Error())
		}
	}
	if r.ns != "" {
		_ = r.e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})
	}
}
