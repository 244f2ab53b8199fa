package memcached

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/sim"
)

const (
	namespace = "default"
	name      = "cache"
	// cleanupOrder is the invariant the ordering bug breaks.
	cleanupOrder = "memcached outlives its deployment"
)

var (
	key    = client.ObjectKey{Namespace: namespace, Name: name}
	images = []string{"memcached:1.6.38-alpine", "memcached:1.6.39-alpine", "memcached:1.6.40-alpine"}
)

// TestSimulation explores 200 seeded schedules on the real reconciler.
func TestSimulation(t *testing.T) {
	start := time.Now()
	n := sim.Check(t, newTarget(t, false), sim.CheckOptions{Seeds: 200, Package: "."})
	t.Logf("%d schedules in %s (%s each)", n, time.Since(start).Round(time.Millisecond), (time.Since(start) / time.Duration(max(n, 1))).Round(time.Microsecond))
}

// TestSimulationFindsBug checks that the simulation catches a reconciler that
// releases its finalizer before deleting the Deployment, and shrinks the
// failure to the fault that exposes it.
func TestSimulationFindsBug(t *testing.T) {
	g := NewWithT(t)
	target := newTarget(t, true)
	failure, ran, err := sim.RunSeeds(t.Context(), target, 1, 200, sim.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(failure).NotTo(BeNil(), "no violation in %d schedules", ran)
	g.Expect(failure.Violation.Invariant).To(Equal(cleanupOrder), failure.Violation.Error())

	shrunk, err := sim.Shrink(t.Context(), target, failure, sim.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shrunk.Violation.Invariant).To(Equal(cleanupOrder))
	// Without faults the buggy pass does both writes and nothing is seen
	// in between: a crash or an API error must split them.
	g.Expect(shrunk.Schedule.Faults()).NotTo(BeEmpty())
	t.Logf("seed %d failed after %d schedule(s); %d fault(s) shrunk to %d:\n%s", failure.Schedule.Seed, ran,
		len(failure.Schedule.Faults()), len(shrunk.Schedule.Faults()), sim.FormatFailure(shrunk, "(this test)"))
}

// TestSimulationIsDeterministic runs the same seeds twice and compares the traces.
func TestSimulationIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	target := newTarget(t, false)
	for seed := uint64(1); seed <= 5; seed++ {
		s := sim.Generate(seed, sim.Config{Perturbations: 3})
		first, err := sim.Run(t.Context(), target, s, sim.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		second, err := sim.Run(t.Context(), target, s, sim.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(second.Trace).To(Equal(first.Trace), "seed %d", seed)
		g.Expect(second.End).To(Equal(first.End), "seed %d", seed)
	}
}

// newTarget is the Memcached operator as a simulation target; buggy
// switches on the finalizer ordering bug.
func newTarget(t *testing.T, buggy bool) sim.Target {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := errors.Join(corev1.AddToScheme(scheme), appsv1.AddToScheme(scheme), AddToScheme(scheme)); err != nil {
		t.Fatalf("building the scheme: %v", err)
	}
	return sim.Target{
		Name:   "memcached",
		Scheme: scheme,
		// Deployments' status is a subresource too; NewFakeClient adds only
		// Pods and StatefulSets.
		StatusSubresources: []client.Object{&Memcached{}, &appsv1.Deployment{}},
		Watches: []sim.Watch{
			{Kind: &Memcached{}, Predicate: predicate.GenerationChangedPredicate{}},
			{Kind: &appsv1.Deployment{}, Map: sim.OwnedBy("Memcached")},
		},
		Setup: func(ctx context.Context, w *sim.World) (*sim.Hooks, error) {
			return setup(ctx, w, buggy)
		},
	}
}

func setup(ctx context.Context, w *sim.World, buggy bool) (*sim.Hooks, error) {
	m := &Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       MemcachedSpec{Size: 3, Image: images[0]},
	}
	if err := w.Client.Create(ctx, m); err != nil {
		return nil, fmt.Errorf("creating the memcached: %w", err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	deployments := &framework.DeploymentSimulator{Client: w.Client}
	gc := &framework.GarbageCollector{Client: w.Client, Kinds: []client.ObjectList{&appsv1.DeploymentList{}}}
	return &sim.Hooks{
		NewReconciler: func(c client.Client) reconcile.Reconciler {
			r := &Reconciler{Client: c, Clock: clk}
			if buggy {
				r.finalize = r.releaseFirst
			}
			return r
		},
		Roots: func(ctx context.Context) ([]reconcile.Request, error) {
			list := &MemcachedList{}
			if err := w.API.List(ctx, list); err != nil {
				return nil, err
			}
			var out []reconcile.Request
			for _, item := range list.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&item)})
			}
			return out, nil
		},
		World: []framework.EnvStep{deployments.Step, gc.Step},
		Perturbations: []sim.Perturbation{
			{Name: "resize", Apply: func(ctx context.Context, choice uint64) (string, error) {
				size := int32(1 + choice%5)
				return changeSpec(ctx, w, func(s *MemcachedSpec) { s.Size = size }, fmt.Sprintf("size %d", size))
			}},
			{Name: "image", Apply: func(ctx context.Context, choice uint64) (string, error) {
				image := images[choice%uint64(len(images))]
				return changeSpec(ctx, w, func(s *MemcachedSpec) { s.Image = image }, "image "+image)
			}},
			{Name: "delete", Apply: func(ctx context.Context, _ uint64) (string, error) {
				return deleteMemcached(ctx, w)
			}},
		},
		Invariants: []sim.Invariant{
			{Name: "deployment is controlled by its memcached", Kind: sim.Safety, Check: func(ctx context.Context, _ sim.StepInfo) error {
				return checkOwner(ctx, w.API)
			}},
			{Name: cleanupOrder, Kind: sim.Safety, Check: func(ctx context.Context, s sim.StepInfo) error {
				return checkCleanupOrder(ctx, w.API, s)
			}},
			{Name: "available only when every replica is ready", Kind: sim.Honesty, Check: func(ctx context.Context, s sim.StepInfo) error {
				return checkHonesty(ctx, w.API, s)
			}},
		},
		Converged: func(ctx context.Context) error { return converged(ctx, w.API) },
		Kinds:     []client.ObjectList{&MemcachedList{}, &appsv1.DeploymentList{}},
	}, nil
}

// changeSpec edits the Memcached's spec as a user would; the fake API
// maintains no generation, so it bumps it as a server does on a spec change.
func changeSpec(ctx context.Context, w *sim.World, edit func(*MemcachedSpec), desc string) (string, error) {
	m := &Memcached{}
	if err := w.API.Get(ctx, key, m); err != nil {
		return "no memcached", client.IgnoreNotFound(err)
	}
	spec := m.Spec
	if edit(&m.Spec); m.Spec == spec {
		return desc + " (unchanged)", nil
	}
	m.Generation++
	return desc, w.Client.Update(ctx, m)
}

// deleteMemcached deletes the Memcached. A server bumps the generation when
// it sets the deletion timestamp (GenerationChangedPredicate relies on it);
// the fake does not, so this bumps it first.
func deleteMemcached(ctx context.Context, w *sim.World) (string, error) {
	m := &Memcached{}
	if err := w.API.Get(ctx, key, m); err != nil {
		return "no memcached", client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		return "already deleting", nil
	}
	m.Generation++
	if err := w.Client.Update(ctx, m); err != nil {
		return "", err
	}
	return "deleted", w.Client.Delete(ctx, m)
}

// checkOwner: a Deployment that exists is controlled by the Memcached of
// its name (by UID while that Memcached exists).
func checkOwner(ctx context.Context, api client.Reader) error {
	dep := &appsv1.Deployment{}
	if err := api.Get(ctx, key, dep); err != nil {
		return client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOf(dep)
	if ref == nil || ref.Kind != "Memcached" || ref.APIVersion != GroupVersion.String() || ref.Name != name {
		return fmt.Errorf("deployment %s has controller %+v, want Memcached %s", key, ref, name)
	}
	m := &Memcached{}
	if err := api.Get(ctx, key, m); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref.UID != m.UID {
		return fmt.Errorf("deployment %s is controlled by UID %s, the memcached is %s", key, ref.UID, m.UID)
	}
	return nil
}

// checkCleanupOrder: a Memcached disappears only once its Deployment is gone
// (the finalizer is released after the cleanup, never before).
func checkCleanupOrder(ctx context.Context, api client.Reader, s sim.StepInfo) error {
	for _, obj := range s.Deleted {
		m, ok := obj.(*Memcached)
		if !ok {
			continue
		}
		err := api.Get(ctx, client.ObjectKeyFromObject(m), &appsv1.Deployment{})
		switch {
		case err == nil:
			return fmt.Errorf("memcached %s is gone but its deployment still exists", m.Name)
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	return nil
}

// checkHonesty: after a fault-free pass, an Available=True
// for the current generation means the Deployment has spec.size ready
// replicas. Passes with faults are exempt: a stale read reports the past
// and a failed pass may not see the Deployment at all.
func checkHonesty(ctx context.Context, api client.Reader, s sim.StepInfo) error {
	if !s.ByOperator || s.Action.Fault.Kind != sim.NoFault {
		return nil
	}
	m := &Memcached{}
	if err := api.Get(ctx, key, m); err != nil {
		return client.IgnoreNotFound(err)
	}
	// Whether or not this pass wrote the status, it holds what a pass that
	// read the world just now computes: it must be true of that world.
	if m.Status.ObservedGeneration != m.Generation || !meta.IsStatusConditionTrue(m.Status.Conditions, ConditionAvailable) {
		return nil
	}
	dep := &appsv1.Deployment{}
	if err := api.Get(ctx, key, dep); err != nil {
		return fmt.Errorf("available at generation %d without a deployment: %w", m.Generation, err)
	}
	if dep.Status.ReadyReplicas != m.Spec.Size {
		return fmt.Errorf("available at generation %d with %d of %d replicas ready", m.Generation, dep.Status.ReadyReplicas, m.Spec.Size)
	}
	return nil
}

// converged: a Memcached that exists is available, rolled out and
// reported for its generation; a deleted one left no Deployment behind.
func converged(ctx context.Context, api client.Reader) error {
	m := &Memcached{}
	dep := &appsv1.Deployment{}
	depErr := api.Get(ctx, key, dep)
	if err := api.Get(ctx, key, m); apierrors.IsNotFound(err) {
		if depErr == nil {
			return fmt.Errorf("memcached %s is deleted but its deployment is left", name)
		}
		return client.IgnoreNotFound(depErr)
	} else if err != nil {
		return err
	}
	if !m.DeletionTimestamp.IsZero() {
		return fmt.Errorf("memcached %s is stuck deleting with finalizers %v", name, m.Finalizers)
	}
	if m.Status.ObservedGeneration != m.Generation {
		return fmt.Errorf("observedGeneration %d, generation %d", m.Status.ObservedGeneration, m.Generation)
	}
	for _, want := range []*framework.ConditionMatcher{
		framework.HaveCondition(ConditionAvailable, metav1.ConditionTrue, ReasonReplicasReady).WithObservedGeneration(m.Generation),
		framework.HaveCondition(ConditionProgressing, metav1.ConditionFalse, ReasonRolloutComplete),
		framework.HaveCondition(ConditionDegraded, metav1.ConditionFalse, ReasonReconciled),
	} {
		if ok, err := want.Match(m); err != nil || !ok {
			return errors.Join(err, errors.New(want.FailureMessage(m)))
		}
	}
	if depErr != nil {
		return fmt.Errorf("reading the deployment: %w", depErr)
	}
	if got := dep.Spec.Replicas; got == nil || *got != m.Spec.Size {
		return fmt.Errorf("deployment replicas %v, want %d", got, m.Spec.Size)
	}
	if c := dep.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != m.Spec.Image {
		return fmt.Errorf("deployment containers %+v, want one running %s", c, m.Spec.Image)
	}
	if s := dep.Status; s.ReadyReplicas != m.Spec.Size || s.UpdatedReplicas != m.Spec.Size {
		return fmt.Errorf("deployment %d updated, %d ready, want %d", s.UpdatedReplicas, s.ReadyReplicas, m.Spec.Size)
	}
	return nil
}

// releaseFirst is the deliberate ordering bug TestSimulationFindsBug must
// catch: it releases the finalizer before deleting the Deployment, so a
// crash between the two writes leaves the Deployment behind.
func (r *Reconciler) releaseFirst(ctx context.Context, m *Memcached) error {
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		return nil
	}
	if err := r.removeFinalizer(ctx, m); err != nil {
		return err
	}
	return r.deleteDeployment(ctx, m)
}
