package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/budget"
	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/timeline"
	"github.com/gauntlet-dev/gauntlet/chaos/workload"
	"github.com/gauntlet-dev/gauntlet/cluster/podstate"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// run is one scenario's live state.
type run struct {
	e     *Engine
	s     *scenario.Scenario
	vars  render.Vars
	ns    string
	gvr   schema.GroupVersionResource
	obj   *unstructured.Unstructured
	roles *roles
	// faultRoles is the resolution the fault's targets came from; the
	// workload command's role is resolved in it too, so that "a pod the
	// fault spares" means the fault's own choice.
	faultRoles *resolution
	// targets are the pods the fault was aimed at.
	targets []chaosmesh.Pods
	// twin runs the scenario with its view fault left out.
	twin bool
	// started is when the run began: the proxy's writes and actions are
	// counted from then.
	started time.Time
	// createdRV is the resource's resourceVersion when it was created.
	createdRV string
	// awaitActed makes a wait for convergence also wait until the
	// operator has acted on the resource (operatorActed): its first.
	awaitActed bool
	// acted is what the resource's owned objects were at the last look
	// of that wait, and since when.
	acted struct {
		owned string
		since time.Time
	}
	// wroteRV is its resourceVersion after the harness's last write to it
	// (its creation, a step's patch): a convergence counts once the
	// operator has seen that version (awaitObserved).
	wroteRV string
	// deletedRV is where a before step's recreate first saw the old
	// object marked for deletion.
	deletedRV string
	command   chan commandResult
	kv        workload.KV
	res       *report.Result
	closer    []func()
	// follows is what the consistency oracle saw of each of the
	// assertions' follows.
	follows []followSeen
	// truthful is what the truthful-status oracle saw.
	truthful followSeen
	// podGuard, while the resource first converges on a cluster, ends the
	// wait when one of its pods will not start.
	podGuard *podstate.Guard
	// budget judges the operator's pod deletions against the
	// PodDisruptionBudgets, where the API proxy shows them.
	budget *budget.Guard
	// start is the state the starting resource converged to, read when
	// the assertions ask whether the run's changes show.
	start *compare.State
	// startRead is when start was read.
	startRead time.Time
}

func (r *run) fail(format string, args ...any) *report.Result {
	r.res.Errors = append(r.res.Errors, fmt.Sprintf(format, args...))
	return r.res
}

// Run runs one scenario on a fresh resource and judges it. A view fault
// runs first as its fault-free twin (the same seed and actions, the proxy
// untouched), then with the fault, and the two end states are compared.
// What differs between two fault-free runs (etcd's member IDs, which
// member leads) is noise, not a finding: a second twin learns it, for
// every scenario on a cluster, and for the first of a set on envtest,
// whose simulated world is the same each time.
func (e *Engine) Run(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) *report.Result {
	if s.Spec.Assertions.SameAsFresh {
		res, _ := e.RunDifferential(ctx, s, seed, artifacts)
		return res
	}
	if !scenario.IsViewAction(s.Spec.Fault.Action) || e.view == nil {
		res, _ := e.runOnce(ctx, s, seed, artifacts, false)
		return res
	}
	start := time.Now()
	e.logf("%s: the fault-free twin first (seed %d)", s.Metadata.Name, seed)
	twinRes, twin := e.twinRun(ctx, s, seed, filepath.Join(artifacts, "twin"))
	if twin == nil {
		return unjudged(twinRes, "the fault-free twin", start)
	}
	if e.host == nil || !e.calibrated {
		if again := e.calibrate(ctx, s, seed, filepath.Join(artifacts, "twin-2"), twin, e.twinRun); again != nil {
			return unjudged(again, "the second fault-free twin", start)
		}
	}
	res, faulted := e.runOnce(ctx, s, seed, artifacts, false)
	if faulted != nil {
		checks, diff := compare.Twin(twin, faulted, e.noise)
		res.Checks = append(res.Checks, checks...)
		res.Violations = append(res.Violations, report.Violations(checks)...)
		res.Twin = diff
		e.logf("%s: against the twin: %d differences, writes %d (twin %d)", s.Metadata.Name, len(diff.Differences), faulted.Writes, twin.Writes)
		if res.Verdict() == report.Failed {
			e.bundle(ctx, res.Artifacts)
		}
	}
	res.Took = time.Since(start)
	return res
}

// runOnce runs the scenario once (as the fault-free twin when asked) and
// returns its result and, when it got that far, its end state.
func (e *Engine) runOnce(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string, twin bool) (*report.Result, *compare.State) {
	start := time.Now()
	name := s.Metadata.Name
	r := &run{e: e, s: s, twin: twin, started: start, vars: render.Vars{Overrides: e.o.Overrides, Defaults: s.Spec.Variables},
		res: &report.Result{Run: &report.Run{Scenario: name, Seed: seed}, Description: s.Metadata.Description, Artifacts: filepath.Join(artifacts, name)}}
	defer func() { r.res.Took = time.Since(start) }()
	why := e.Runner.Missing(ctx, needs(s.Spec.Fault.Action))
	if why == "" && s.Spec.Fault.Action == scenario.ActionNodeLoss {
		var err error
		if why, err = e.nodeLossMissing(ctx); err != nil {
			return r.fail("%v", err), nil
		}
	}
	if why != "" {
		r.res.Skipped = why
		e.logf("%s: skipped before creating anything: %s", name, why)
		return r.res, nil
	}
	if e.host != nil && s.Spec.Workload != nil {
		r.res.Skipped = "the workload talks to the resource's pods, and envtest runs none (run it on a cluster)"
		e.logf("%s: skipped before creating anything: %s", name, r.res.Skipped)
		return r.res, nil
	}
	defer r.cleanup(ctx)
	res := r.run(ctx, seed)
	if r.obj != nil {
		res.Conditions = reportConditions(r.obj)
	}
	if res.Verdict() != report.Passed || (e.view == nil && !s.Spec.Assertions.SameAsFresh && !twin) {
		return res, nil
	}
	end, err := compare.Capture(ctx, r.e.Dynamic, r.gvr, r.ns, r.obj.GetName())
	if err != nil {
		return r.fail("reading the end state: %v", err), nil
	}
	end.Writes, end.Deleted = r.stateWrites(r.started), r.deletes(r.started)
	return res, end
}

// run takes one scenario from its resource's creation to its verdict.
func (r *run) run(ctx context.Context, seed uint64) *report.Result {
	e, s, name, start := r.e, r.s, r.s.Metadata.Name, r.started
	if v := e.view; v != nil {
		// Each run draws its probabilities afresh from its seed: a twin
		// and its faulted run, or a replay of one scenario, draw alike.
		v.Proxy.Reseed(seed)
		defer r.recordInjections()
	}
	if err := r.create(ctx); err != nil {
		return r.fail("creating the resource: %v", err)
	}
	if v := e.view; v != nil {
		r.budget = &budget.Guard{Client: e.Client, Namespace: r.ns}
		defer r.budget.Watch(v.Proxy)()
	}
	if err := r.firstConverged(ctx); err != nil {
		return r.fail("%v", err)
	}
	e.logf("%s: %s %s/%s converged in %s", name, r.obj.GetKind(), r.ns, r.obj.GetName(), time.Since(start).Round(time.Second))
	if err := r.readStart(ctx); err != nil {
		return r.fail("reading the converged starting resource: %v", err)
	}
	r.roles = &roles{e: e, namespace: r.ns, defs: s.Spec.Roles, rng: rand.New(rand.NewPCG(seed, 2)), owner: r.obj}

	before, err := r.operatorState(ctx)
	if err != nil {
		return r.fail("reading the operator before the fault: %v", err)
	}
	if err := e.knownController(before.families); err != nil {
		return r.fail("%v", err)
	}
	tctx, stopTimeline := context.WithCancel(ctx)
	defer stopTimeline()
	tl := timeline.Watch(tctx, e.Dynamic, r.gvr, r.ns, r.obj.GetName())

	load, err := r.startWorkload(ctx, seed)
	if err != nil {
		return r.fail("%v", err)
	}
	obs := &Observer{Pods: r.watchedPods}
	if m := e.operator.Metrics; m != nil {
		obs.Scrape, obs.Controller = r.scrapeOperator, m.Controller
	}
	obs.Start(ctx)

	runRes := r.trial(ctx, seed)
	// A wait in the trial that met an image the nodes cannot pull noted
	// it on the run so far.
	runRes.Unpullable = r.res.Unpullable
	r.res.Run = runRes
	judging := time.Now()
	ledger := r.collect(load, stopTimeline, tl, obs)
	if runRes.Skipped != "" || runRes.Failed() {
		if ledger != nil {
			_, _ = ledger.Save(r.res.Artifacts)
		}
		return r.res
	}
	if r.command != nil {
		r.res.Checks = append(r.res.Checks, (<-r.command).check(r.res.Artifacts))
	}
	if err := r.judge(ctx, tl, ledger, before); err != nil {
		return r.fail("%v", err)
	}
	r.res.Violations = append(r.res.Violations, report.Violations(r.res.Checks)...)
	if len(r.res.Violations) > 0 && ledger != nil {
		_, _ = ledger.Save(r.res.Artifacts)
	}
	e.logf("%s: %d checks, %d violated (judged in %s)", name, len(r.res.Checks), len(r.res.Violations), time.Since(judging).Round(time.Millisecond))
	return r.res
}

// trial hands the scenario's fault to the Runner: resolved on the roles'
// pods, held while the during actions run, then healed and converged.
func (r *run) trial(ctx context.Context, seed uint64) *report.Run {
	f := r.s.Spec.Fault
	rng := rand.New(rand.NewPCG(seed, 1))
	return r.e.Runner.Run(ctx, chaosmesh.Trial{
		Name: r.s.Metadata.Name,
		Hold: f.Hold.Duration,
		Fault: func(ctx context.Context, _ *rand.Rand) (*chaosmesh.Experiment, error) {
			// The before steps (the twin takes them too), then the
			// fault on what they left.
			if err := r.actions(ctx, "before", r.s.Spec.Before); err != nil {
				return nil, err
			}
			return r.experiment(ctx, f)
		},
		During:    func(ctx context.Context) error { return r.during(ctx, rng) },
		Still:     r.e.view.Still(r.e.stillHolds),
		Converged: r.waitConverged,
	}, seed)
}

// collect stops the workload, the condition timeline and the observer,
// and records what they saw; it returns the workload's ledger (nil without
// an etcd-kv workload).
func (r *run) collect(load *workload.Workload, stopTimeline context.CancelFunc, tl *timeline.Timeline, obs *Observer) *workload.Ledger {
	var ledger *workload.Ledger
	if load != nil {
		ledger = load.Stop()
	}
	stopTimeline()
	r.res.Timeline = tl.Samples()
	r.res.Series = &report.Series{}
	if ledger != nil {
		r.res.Series.SetWorkload(ledger)
	}
	r.res.Series.Operator, r.res.Series.Pods = obs.Stop()
	for _, err := range tl.Errors() {
		r.res.Errors = append(r.res.Errors, "the condition timeline is incomplete: its watch failed: "+err)
	}
	return ledger
}

// create makes the namespace and the resource, retrying while the
// operator's webhook cannot be reached yet.
func (r *run) create(ctx context.Context) error {
	// On an existing cluster an earlier run's namespace of the same name
	// may still be terminating: take the next sequence number.
	for attempt := 0; ; attempt++ {
		r.ns = fmt.Sprintf("chaos-%s-%d", r.s.Metadata.Name, r.e.nextSeq())
		if len(r.ns) > 63 {
			r.ns = strings.TrimRight(r.ns[:63], "-")
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns, Labels: r.namespaceLabels()}}
		err := r.e.Client.Create(ctx, ns)
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) || attempt == 20 {
			r.ns = ""
			return err
		}
	}
	obj, err := render.Resource(r.e.o.Set, r.s, r.vars)
	if err != nil {
		return err
	}
	r.obj = obj
	r.obj.SetNamespace(r.ns)
	gvk := r.obj.GroupVersionKind()
	return framework.PollFor(ctx, "the API server to accept "+gvk.Kind+" "+r.obj.GetName(), createAdmissionWait, time.Second, func(ctx context.Context) (bool, string, error) {
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
		switch {
		case apierrors.IsInvalid(err):
			// The schema or a CEL rule: no retry changes its answer.
			return false, "", fmt.Errorf("the API server refused %s %s: %w", gvk.Kind, r.obj.GetName(), err)
		case err != nil:
			return false, err.Error(), nil
		}
		r.obj, r.createdRV, r.wroteRV = created, created.GetResourceVersion(), created.GetResourceVersion()
		return true, "", nil
	})
}

func (r *run) resource() dynamic.ResourceInterface {
	return r.e.Dynamic.Resource(r.gvr).Namespace(r.ns)
}

func statusOf(u *unstructured.Unstructured) string {
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	b, _ := json.Marshal(st)
	return string(b)
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

// Waits of a run's edges.
const (
	// createAdmissionWait bounds retries of the resource's create: a CRD
	// the operator's deployment just established is served within
	// seconds, its webhook within a minute of its pod starting.
	createAdmissionWait = 2 * time.Minute
	// patchAdmissionWait bounds retries of a during patch, which the
	// operator's webhook may refuse while its pod restarts under a fault.
	patchAdmissionWait = 3 * time.Minute
	// DefaultDeleteWithin bounds the wait for the resource to go when a
	// scenario gives no deleteWithin: a finalizer's final snapshot Job on
	// kind, with its image pulled, fits in it.
	DefaultDeleteWithin = 3 * time.Minute
	// cleanupBeyondDeletion is what the whole cleanup may take beyond its
	// wait for the resource to go: the failure bundle and the namespace's
	// removal.
	cleanupBeyondDeletion = time.Minute
)

// deleteWithin is the scenario's bound on the wait for the resource to go.
func (r *run) deleteWithin() time.Duration {
	if d := r.s.Spec.Resource.DeleteWithin.Duration; d > 0 {
		return d
	}
	return DefaultDeleteWithin
}

// cleanup collects a bundle when the scenario failed, closes the workload,
// deletes the resource and waits until it is gone, then the namespace.
func (r *run) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.deleteWithin()+cleanupBeyondDeletion)
	defer cancel()
	for i := len(r.closer) - 1; i >= 0; i-- {
		r.closer[i]()
	}
	r.bundle(ctx)
	if r.obj != nil && r.obj.GetUID() != "" {
		watch, owned := r.beforeDeletion(ctx)
		deleted := time.Now()
		if err := r.deleteResource(ctx); err != nil {
			r.res.Errors = append(r.res.Errors, "cleanup: "+err.Error())
		} else {
			r.e.slowest(&r.e.slowestDeletion, time.Since(deleted))
			if r.e.view != nil {
				r.leftAfterDeletion(ctx)
				r.writesAfterRelease(deleted, owned)
			}
		}
		if watch != nil {
			for _, c := range watch.Judge(ctx, r.childrenFirst()) {
				r.res.Checks = append(r.res.Checks, c)
				if !c.OK() {
					r.res.Violations = append(r.res.Violations, c.Violation)
				}
			}
		}
		r.bundle(ctx) // failed in its deletion: what is left
	}
	if r.ns != "" {
		_ = r.e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})
	}
}

// deleteResource deletes the run's resource and waits, deleteWithin at
// most, until it is gone. Its namespace's deletion alone would not do:
// envtest runs no namespace controller, so what a deleted namespace holds
// stays, and the operator goes on reconciling it.
func (r *run) deleteResource(ctx context.Context) error {
	_ = r.resource().Delete(ctx, r.obj.GetName(), metav1.DeleteOptions{})
	return framework.PollFor(ctx, r.obj.GetKind()+" "+r.ns+"/"+r.obj.GetName()+" to be deleted", r.deleteWithin(), time.Second, func(ctx context.Context) (bool, string, error) {
		_, err := r.resource().Get(ctx, r.obj.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
}

// recordInjections copies what the proxy did during the run into the
// result.
func (r *run) recordInjections() {
	for _, in := range r.e.view.Proxy.Injected() {
		if in.At.Before(r.started) {
			continue
		}
		r.res.Injections = append(r.res.Injections, report.Injection{At: in.At, What: in.What, Request: in.Request.String()})
	}
}
