package chaosmesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// Trial is one fault and what happens around it, as the runner sees a
// scenario once its file is resolved. The runner owns the fault's life
// cycle; the caller owns what to observe and how to judge.
type Trial struct {
	// Name identifies the scenario in logs and reports.
	Name string
	// Fault resolves its targets against the live cluster (with rng for
	// every choice, so a seed replays the run) and builds the experiment.
	Fault func(ctx context.Context, rng *rand.Rand) (*Experiment, error)
	// During, when set, runs once the fault is injected, concurrently with
	// the hold (for example a scale-up the operator must carry out while
	// it is being killed). Its error fails the run.
	During func(ctx context.Context) error
	// Hold is how long the fault stays injected (default 20s). A fault
	// that ends by itself (a pod kill) is still held, so the observation
	// window has the same shape for every scenario.
	Hold time.Duration
	// Still, when set, may end the hold early: once During has ended,
	// the runner asks it every stillPoll, with when During ended, and
	// heals as soon as it answers true (nothing left to happen under the
	// fault: the rest of the hold would only wait). Hold stays the
	// longest the fault holds.
	Still func(since time.Time) bool
	// Converged waits, after the recovery, until the system is healthy
	// again; its error (with what it last saw) fails the run.
	Converged func(ctx context.Context) error
}

// Runner runs scenarios against a cluster with Chaos Mesh installed.
type Runner struct {
	Config *rest.Config
	// Client must know the Chaos Mesh types (AddToScheme).
	Client client.Client
	// ChaosNamespace is where Chaos Mesh's daemon runs (default chaos-mesh).
	ChaosNamespace string
	// DaemonLabels select the chaos-daemon pods (default
	// app.kubernetes.io/component=chaos-daemon).
	DaemonLabels map[string]string
	// InjectTimeout and RecoverTimeout bound the waits for Chaos Mesh's
	// report (default 90s each).
	InjectTimeout, RecoverTimeout time.Duration
	// Log receives one line per step with its duration (default stderr).
	Log io.Writer

	// Unavailable, when set, is why no Chaos Mesh fault can run here
	// (envtest): every experiment but the harness's own faults is skipped
	// with it.
	Unavailable string

	// once sets the defaults; mu guards features. Scenarios run side by
	// side share the runner.
	once     sync.Once
	mu       sync.Mutex
	features map[Feature]error
}

func (r *Runner) defaults() { r.once.Do(r.setDefaults) }

func (r *Runner) setDefaults() {
	if r.ChaosNamespace == "" {
		r.ChaosNamespace = "chaos-mesh"
	}
	if r.DaemonLabels == nil {
		r.DaemonLabels = map[string]string{"app.kubernetes.io/component": "chaos-daemon"}
	}
	if r.InjectTimeout == 0 {
		r.InjectTimeout = 90 * time.Second
	}
	if r.RecoverTimeout == 0 {
		r.RecoverTimeout = 90 * time.Second
	}
	if r.Log == nil {
		r.Log = os.Stderr
	}
}

func (r *Runner) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.Log, "%s chaos: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Run runs s with seed: inject, wait until Chaos Mesh reports every
// target injected, hold (running During), recover, wait until every target
// is recovered and the object is gone, wait for convergence, and check that
// no chaos object, finalizer or active network rule is left. Cleanup runs
// whatever happened before it.
func (r *Runner) Run(ctx context.Context, s Trial, seed uint64) *report.Run {
	r.defaults()
	run := &report.Run{Scenario: s.Name, Seed: seed, Phases: report.Phases{Start: time.Now()}}
	hold := s.Hold
	if hold == 0 {
		hold = defaultHold
	}
	exp := r.resolve(ctx, s, seed, run)
	if exp == nil {
		return run
	}

	defer r.cleanup(ctx, exp, run)
	recoveryTried := false
	if h := exp.Harness; h != nil {
		// A harness fault is undone even when the run stops early: a node
		// left stopped would spoil every later scenario.
		defer func() {
			if recoveryTried {
				return
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), harnessRecoverWithin)
			defer cancel()
			if err := h.Recover(ctx); err != nil {
				run.Failf("cleanup: undoing %s: %v", run.Experiment, err)
			}
		}()
	}

	t0 := time.Now()
	run.Phases.Requested = t0
	if err := r.inject(ctx, exp); err != nil {
		run.Failf("%v", err)
		return run
	}
	run.Phases.Injected = time.Now()
	run.InjectTook = run.Phases.Injected.Sub(t0)
	r.logf("%s: injected on every target in %s", s.Name, run.InjectTook.Round(time.Millisecond))

	during, held := r.hold(ctx, s, hold)
	if ctx.Err() != nil {
		run.Failf("interrupted while holding the fault: %v", ctx.Err())
		return run
	}
	t1 := time.Now()
	recoveryTried = true
	if err := r.recover(ctx, exp); err != nil {
		run.Failf("%v", err)
		return run
	}
	run.Phases.Healed = time.Now()
	run.HealTook = run.Phases.Healed.Sub(t1)
	r.logf("%s: held %s, every target recovered and the object gone in %s", s.Name, held, run.HealTook.Round(time.Millisecond))
	r.converge(ctx, s, during, run)
	return run
}

// stillPoll is how often a hold asks whether it may end (Trial.Still).
const stillPoll = 250 * time.Millisecond

// hold starts the trial's During and holds the fault for hold, or less
// once During has ended and Trial.Still says nothing is left to happen.
// It returns During's result, to come, and what it held, for the log.
func (r *Runner) hold(ctx context.Context, s Trial, hold time.Duration) (<-chan error, string) {
	during, ended := make(chan error, 1), make(chan time.Time, 1)
	if s.During != nil {
		go func() {
			err := s.During(ctx)
			ended <- time.Now()
			during <- err
		}()
	} else {
		during <- nil
		ended <- time.Now()
	}
	start := time.Now()
	deadline := time.NewTimer(hold)
	defer deadline.Stop()
	var poll <-chan time.Time
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return during, ""
		case <-deadline.C:
			return during, hold.String()
		case since = <-ended:
			if s.Still != nil {
				t := time.NewTicker(stillPoll)
				defer t.Stop()
				poll = t.C
			}
		case <-poll:
			if s.Still(since) {
				return during, fmt.Sprintf("%s of %s (still)", time.Since(start).Round(time.Millisecond), hold)
			}
		}
	}
}

// resolve builds the trial's experiment and records it and its targets in
// run. It returns nil when the run ends there: skipped (the fault cannot be
// made here, or the nodes lack a kernel feature it needs) or failed.
func (r *Runner) resolve(ctx context.Context, s Trial, seed uint64, run *report.Run) *Experiment {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	exp, err := s.Fault(ctx, rng)
	if skip := (SkipError{}); errors.As(err, &skip) {
		run.Skipped = skip.Reason
		r.logf("%s: skipped: %s", s.Name, skip.Reason)
		return nil
	}
	if err != nil {
		run.Failf("resolving the fault's targets: %v", err)
		return nil
	}
	if r.Unavailable != "" && exp.Harness == nil {
		run.Skipped = r.Unavailable
		r.logf("%s: skipped: %s", s.Name, r.Unavailable)
		return nil
	}
	run.Experiment = exp.Kind()
	for _, t := range exp.Targets {
		run.Targets = append(run.Targets, t.String())
	}
	if len(run.Targets) == 0 {
		r.logf("%s (seed %d): %s", s.Name, seed, run.Experiment)
	} else {
		r.logf("%s (seed %d): %s on %s", s.Name, seed, run.Experiment, strings.Join(run.Targets, " and "))
	}
	if missing := r.Missing(ctx, exp.Needs); missing != "" {
		run.Skipped = missing
		r.logf("%s: skipped: %s", s.Name, missing)
		return nil
	}
	return exp
}

// converge, once the fault is healed, waits for the trial's During to end
// (its error fails the run) and then for the system to converge, and
// records when it did.
func (r *Runner) converge(ctx context.Context, s Trial, during <-chan error, run *report.Run) {
	select {
	case err := <-during:
		if err != nil {
			run.Failf("the action during the fault failed: %v", err)
		}
	case <-ctx.Done():
		run.Failf("interrupted waiting for the action during the fault: %v", ctx.Err())
		return
	}
	if s.Converged != nil {
		t2 := time.Now()
		if err := s.Converged(ctx); err != nil {
			run.Failf("not converged after the heal: %v", err)
			return
		}
		r.logf("%s: converged %s after the heal", s.Name, time.Since(t2).Round(time.Millisecond))
	}
	run.Phases.Converged = time.Now()
}

// SkipError is what a scenario's Fault returns when the fault cannot be made
// on this cluster (no node to stop, say): the scenario is skipped with the
// reason, not failed.
type SkipError struct{ Reason string }

func (e SkipError) Error() string { return e.Reason }

// Skip returns a SkipError.
func Skip(reason string) error { return SkipError{Reason: reason} }

// waitInjected polls the chaos object until AllInjected is True and every
// target pod has a record in phase Injected.
func (r *Runner) waitInjected(ctx context.Context, exp *Experiment) error {
	want := 0
	for _, t := range exp.Targets {
		want += len(t.Names)
	}
	return framework.PollFor(ctx, fmt.Sprintf("Chaos Mesh to report %s injected on %d targets", exp.Name(), want), r.InjectTimeout, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := r.status(ctx, exp)
			if err != nil {
				return false, err.Error(), nil
			}
			injected := 0
			for _, rec := range st.Experiment.Records {
				if rec.Phase == chaosv1alpha1.Injected {
					injected++
				}
			}
			seen := describeStatus(st)
			return conditionTrue(st, chaosv1alpha1.ConditionAllInjected) && injected >= want, seen, nil
		})
}

// recover pauses the experiment, waits until Chaos Mesh reports every
// target recovered, then deletes it and waits until it is gone (its
// finalizer removed).
//
// A one-shot fault (pod-kill, container-kill) has nothing to undo: Chaos
// Mesh ignores the pause and keeps its records Injected, so it is deleted
// at once, which its finalizer allows only after Chaos Mesh has processed it.
// inject creates the chaos object and waits until Chaos Mesh reports every
// target injected, or makes the harness's fault.
func (r *Runner) inject(ctx context.Context, exp *Experiment) error {
	if h := exp.Harness; h != nil {
		if err := h.Inject(ctx); err != nil {
			return fmt.Errorf("injecting %s %s: %w", h.Kind, h.Name, err)
		}
		return nil
	}
	if err := r.Client.Create(ctx, exp.Object); err != nil {
		return fmt.Errorf("creating %s %s: %w", exp.Kind(), exp.Name(), err)
	}
	return r.waitInjected(ctx, exp)
}

func (r *Runner) recover(ctx context.Context, exp *Experiment) error {
	if h := exp.Harness; h != nil {
		if err := h.Recover(ctx); err != nil {
			return fmt.Errorf("recovering from %s %s: %w", h.Kind, h.Name, err)
		}
		return nil
	}
	obj := exp.Object
	if o, ok := obj.(interface{ IsOneShot() bool }); ok && o.IsOneShot() {
		return r.deleteAndWait(ctx, obj)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+chaosv1alpha1.PauseAnnotationKey+`":"true"}}}`))
	if err := r.Client.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("pausing %s: %w", exp.Name(), err)
	}
	err := framework.PollFor(ctx, "Chaos Mesh to report "+exp.Name()+" recovered on every target", r.RecoverTimeout, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			st, err := r.status(ctx, exp)
			if err != nil {
				return false, err.Error(), nil
			}
			for _, rec := range st.Experiment.Records {
				if rec.Phase != chaosv1alpha1.NotInjected {
					return false, describeStatus(st), nil
				}
			}
			return conditionTrue(st, chaosv1alpha1.ConditionAllRecovered), describeStatus(st), nil
		})
	if err != nil {
		return err
	}
	return r.deleteAndWait(ctx, obj)
}

func (r *Runner) deleteAndWait(ctx context.Context, obj client.Object) error {
	if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", obj.GetName(), err)
	}
	return framework.PollFor(ctx, "chaos object "+obj.GetName()+" to be gone", r.RecoverTimeout, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return true, "gone", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			return false, fmt.Sprintf("still there, finalizers %v", obj.GetFinalizers()), nil
		})
}

func (r *Runner) status(ctx context.Context, exp *Experiment) (*chaosv1alpha1.ChaosStatus, error) {
	obj := exp.Object
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil, err
	}
	switch o := obj.(type) {
	case *chaosv1alpha1.PodChaos:
		return &o.Status.ChaosStatus, nil
	case *chaosv1alpha1.NetworkChaos:
		return &o.Status.ChaosStatus, nil
	}
	return nil, fmt.Errorf("unsupported chaos object %T", obj)
}

func conditionTrue(st *chaosv1alpha1.ChaosStatus, t chaosv1alpha1.ChaosConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describeStatus(st *chaosv1alpha1.ChaosStatus) string {
	var b strings.Builder
	b.WriteString("conditions:")
	for _, c := range st.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	fmt.Fprintf(&b, "; desiredPhase %q; records:", st.Experiment.DesiredPhase)
	for _, rec := range st.Experiment.Records {
		fmt.Fprintf(&b, " %s=%s(injected %d, recovered %d", rec.Id, rec.Phase, rec.InjectedCount, rec.RecoveredCount)
		if n := len(rec.Events); n > 0 {
			e := rec.Events[n-1]
			fmt.Fprintf(&b, ", last %s %s", e.Operation, e.Type)
			if e.Message != "" {
				fmt.Fprintf(&b, ": %s", e.Message)
			}
		}
		b.WriteString(")")
	}
	if len(st.Experiment.Records) == 0 {
		b.WriteString(" none")
	}
	return b.String()
}

// Bounds of a fault's edges.
const (
	// defaultHold is how long a fault holds when the scenario says not:
	// long enough for an election and a few reconciles under it.
	defaultHold = 20 * time.Second
	// harnessRecoverWithin bounds undoing a harness fault (a stopped kind
	// node starting again and its kubelet reporting Ready).
	harnessRecoverWithin = 3 * time.Minute
	// experimentCleanupWithin bounds deleting a Chaos Mesh experiment and
	// checking that nothing of it is left.
	experimentCleanupWithin = 2 * time.Minute
)

// cleanup deletes the experiment if it is still there, then checks that no
// chaos object or finalizer is left in the namespace and that no active
// rule stays in a target's network namespace.
func (r *Runner) cleanup(ctx context.Context, exp *Experiment, run *report.Run) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), experimentCleanupWithin)
	defer cancel()
	t0 := time.Now()
	if exp.Harness != nil {
		return // undone by report.Run; no chaos object or rule to look for
	}
	if err := r.deleteAndWait(ctx, exp.Object); err != nil {
		run.Failf("cleanup: %v", err)
	}
	ns := exp.Object.GetNamespace()
	left, err := r.chaosObjects(ctx, ns)
	switch {
	case err != nil:
		run.Failf("cleanup: listing chaos objects: %v", err)
	case len(left) > 0:
		run.Failf("cleanup: chaos objects left in %s: %s", ns, strings.Join(left, ", "))
	}
	if exp.NetworkRules {
		leftovers, active, err := r.NetworkRules(ctx, exp.Targets)
		if err != nil {
			run.Failf("cleanup: inspecting the targets' network namespaces: %v", err)
		}
		run.Leftovers = leftovers
		for _, a := range active {
			run.Failf("cleanup: active rule left: %s", a)
		}
	}
	r.logf("%s: cleanup checked in %s", run.Scenario, time.Since(t0).Round(time.Millisecond))
}

// chaosObjects lists the PodChaos and NetworkChaos objects in ns, and
// PodNetworkChaos objects that still carry rules.
func (r *Runner) chaosObjects(ctx context.Context, ns string) ([]string, error) {
	var left []string
	pcs := &chaosv1alpha1.PodChaosList{}
	ncs := &chaosv1alpha1.NetworkChaosList{}
	pncs := &chaosv1alpha1.PodNetworkChaosList{}
	var errs []error
	for _, l := range []client.ObjectList{pcs, ncs, pncs} {
		errs = append(errs, r.Client.List(ctx, l, client.InNamespace(ns)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, o := range pcs.Items {
		left = append(left, fmt.Sprintf("PodChaos %s (finalizers %v)", o.Name, o.Finalizers))
	}
	for _, o := range ncs.Items {
		left = append(left, fmt.Sprintf("NetworkChaos %s (finalizers %v)", o.Name, o.Finalizers))
	}
	for _, o := range pncs.Items {
		if len(o.Spec.IPSets)+len(o.Spec.Iptables)+len(o.Spec.TrafficControls) > 0 {
			left = append(left, fmt.Sprintf("PodNetworkChaos %s with %d ipsets, %d chains, %d tc rules", o.Name,
				len(o.Spec.IPSets), len(o.Spec.Iptables), len(o.Spec.TrafficControls)))
		}
	}
	return left, nil
}
