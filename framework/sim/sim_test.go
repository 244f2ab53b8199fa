package sim

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/framework"
)

func TestGenerateIsAPureFunctionOfTheSeed(t *testing.T) {
	g := NewWithT(t)
	cfg := Config{Perturbations: 3}
	g.Expect(Generate(7, cfg)).To(Equal(Generate(7, cfg)))
	g.Expect(Generate(7, cfg)).NotTo(Equal(Generate(8, cfg)))
	s := Generate(7, cfg)
	g.Expect(s.Actions).To(HaveLen(40))
	g.Expect(s.Faults()).NotTo(BeEmpty())

	// Keep changes faults only, never the inputs.
	kept := s.Keep(s.Faults()[:1])
	g.Expect(kept.Faults()).To(Equal(s.Faults()[:1]))
	for i := range s.Actions {
		g.Expect(kept.Actions[i].Kind).To(Equal(s.Actions[i].Kind))
		g.Expect(kept.Actions[i].Choice).To(Equal(s.Actions[i].Choice))
	}
	g.Expect(s.WithoutFaults().Faults()).To(BeEmpty())
	g.Expect(s.Describe([]string{"a", "b", "c"})).To(ContainSubstring("reconcile"))
}

func TestSeedsOfOneScriptShareTheirInputsAndTheFaultFreeRun(t *testing.T) {
	g := NewWithT(t)
	cfg := Config{Perturbations: 3} // four seeds per script by default
	g.Expect(Generate(4, cfg).WithoutFaults().Actions).To(Equal(Generate(7, cfg).WithoutFaults().Actions))
	g.Expect(Generate(4, cfg).Faults()).NotTo(Equal(Generate(5, cfg).Faults()))
	g.Expect(Generate(7, cfg).WithoutFaults().Actions).NotTo(Equal(Generate(8, cfg).WithoutFaults().Actions))
	one := Generate(4, Config{Perturbations: 3, FaultVariants: 1})
	g.Expect(one.WithoutFaults().Actions).NotTo(Equal(Generate(5, Config{Perturbations: 3, FaultVariants: 1}).WithoutFaults().Actions))

	// Counting setups: each seed of the script runs once with its faults,
	// and the script once without.
	target := toyTarget(t)
	setups := 0
	inner := target.Setup
	target.Setup = func(ctx context.Context, w *World) (*Hooks, error) {
		setups++
		return inner(ctx, w)
	}
	cache := newBaselines()
	passed := 0
	for seed := uint64(4); seed <= 7; seed++ {
		s := Generate(seed, Config{})
		g.Expect(s.Faults()).NotTo(BeEmpty(), "seed %d", seed)
		res, err := runDifferential(t.Context(), target, s, Options{}, cache)
		g.Expect(err).NotTo(HaveOccurred())
		if res.Violation == nil { // a run that breaks an invariant needs no twin
			passed++
		}
	}
	g.Expect(passed).To(BeNumerically(">=", 2), "enough seeds reached the twin to show it shared")
	g.Expect(setups).To(Equal(4+1), "four faulty runs and one shared fault-free run (%d seeds passed)", passed)
}

func TestReconcilerView(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	fake := newFake(scheme)
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}

	// A crash lets CrashAfter writes through, then every call fails.
	v := newReconcilerView(fake, Fault{Kind: Crash, CrashAfter: 1}, nil)
	g.Expect(v.client.Create(ctx, cm("a"))).To(Succeed())
	g.Expect(v.client.Create(ctx, cm("b"))).To(MatchError(ErrCrashed))
	g.Expect(v.client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, cm("a"))).To(MatchError(ErrCrashed))
	g.Expect(v.crashed()).To(BeTrue())
	g.Expect(v.writes).To(Equal(1))

	// An API fault fails exactly the Nth call of its verb, with the
	// framework's error.
	v = newReconcilerView(fake, Fault{Kind: APIError, Verb: "get", Nth: 2, Err: Conflict}, nil)
	key := client.ObjectKey{Namespace: "ns", Name: "a"}
	g.Expect(v.client.Get(ctx, key, cm("a"))).To(Succeed())
	g.Expect(apierrors.IsConflict(v.client.Get(ctx, key, cm("a")))).To(BeTrue())
	g.Expect(v.client.Get(ctx, key, cm("a"))).To(Succeed())
	g.Expect(v.crashed()).To(BeFalse())

	// A failed write is not counted; a subresource write is.
	v = newReconcilerView(fake, Fault{Kind: APIError, Verb: "update/status", Nth: 1, Err: Timeout}, nil)
	a := cm("a")
	g.Expect(fake.Get(ctx, key, a)).To(Succeed())
	g.Expect(apierrors.IsServerTimeout(v.client.Status().Update(ctx, a))).To(BeTrue())
	g.Expect(v.writes).To(Equal(0))
	g.Expect(v.client.Update(ctx, a)).To(Succeed())
	g.Expect(v.writes).To(Equal(1))

	// Stale reads come from the old view; writes still reach the API.
	old := newMemoryReader(scheme, nil)
	v = newReconcilerView(fake, Fault{Kind: Stale, Lag: 1}, old)
	g.Expect(apierrors.IsNotFound(v.client.Get(ctx, key, cm("a")))).To(BeTrue(), "a stale view predates a")
	g.Expect(v.client.List(ctx, &corev1.ConfigMapList{})).To(Succeed())
	g.Expect(v.client.Create(ctx, cm("c"))).To(Succeed())
	g.Expect(fake.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c"}, cm("c"))).To(Succeed())
}

func TestScheduleFaultsRunThroughTheFrameworkLayer(t *testing.T) {
	for _, tc := range []struct {
		fault  Fault
		want   framework.Fault
		client bool
	}{
		{Fault{Kind: Crash, CrashAfter: 2}, framework.Fault{Verb: framework.AnyWrite, Nth: 3, Crash: true, Err: ErrCrashed}, true},
		{Fault{Kind: APIError, Verb: "patch/status", Nth: 2, Err: Conflict}, framework.Fault{Verb: "patch/status", Nth: 2, Err: framework.ErrConflict("sim", "object")}, true},
		{Fault{Kind: APIError, Verb: "get", Nth: 1, Err: Timeout}, framework.Fault{Verb: "get", Nth: 1, Err: framework.ErrServerTimeout}, true},
		{Fault{Kind: APIError, Verb: "list", Nth: 1, Err: Internal}, framework.Fault{Verb: "list", Nth: 1, Err: framework.ErrInternal}, true},
		{Fault{Kind: APIError, Verb: "apply", Nth: 1, Err: TooManyRequests}, framework.Fault{Verb: "apply", Nth: 1, Err: framework.ErrTooManyRequests}, true},
		{Fault{Kind: Stale, Lag: 2}, framework.Fault{}, false},
		{Fault{Kind: DropEvent}, framework.Fault{}, false},
		{Fault{}, framework.Fault{}, false},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			g := NewWithT(t)
			got, ok := tc.fault.clientFault()
			g.Expect(ok).To(Equal(tc.client))
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestMemoryReaderListsBySelector(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	m := newMemoryReader(scheme, []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1", Labels: map[string]string{"app": "x"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p2", Labels: map[string]string{"app": "y"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "p3", Labels: map[string]string{"app": "x"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1"}},
	})
	list := &corev1.PodList{}
	g.Expect(m.List(t.Context(), list, client.InNamespace("a"), client.MatchingLabels{"app": "x"})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Name).To(Equal("p1"))
	pod := &corev1.Pod{}
	g.Expect(m.Get(t.Context(), client.ObjectKey{Namespace: "b", Name: "p3"}, pod)).To(Succeed())
	g.Expect(pod.Labels).To(HaveKeyWithValue("app", "x"))

	// A change gives a new view; the old one is untouched (stale reads).
	newer := m.with(change{old: pod, new: nil})
	g.Expect(apierrors.IsNotFound(newer.Get(t.Context(), client.ObjectKey{Namespace: "b", Name: "p3"}, &corev1.Pod{}))).To(BeTrue())
	g.Expect(m.Get(t.Context(), client.ObjectKey{Namespace: "b", Name: "p3"}, &corev1.Pod{})).To(Succeed())
}

func TestMemoryReaderListsByIndex(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	byApp := framework.FieldIndex{Object: &corev1.Pod{}, Field: "app", Extract: func(o client.Object) []string {
		if v, ok := o.GetLabels()["app"]; ok {
			return []string{v}
		}
		return nil
	}}
	indexes, err := memoryIndexes(scheme, []framework.FieldIndex{byApp})
	g.Expect(err).NotTo(HaveOccurred())
	m := newMemoryReader(scheme, []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1", Labels: map[string]string{"app": "x"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p2", Labels: map[string]string{"app": "y"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p3"}},
	})
	m.indexes = indexes
	list := &corev1.PodList{}
	g.Expect(m.List(t.Context(), list, client.InNamespace("a"), client.MatchingFields{"app": "y"})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Name).To(Equal("p2"))

	// A newer view keeps the indexes.
	newer := m.with(change{new: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p4", Labels: map[string]string{"app": "y"}}}})
	g.Expect(newer.List(t.Context(), list, client.InNamespace("a"), client.MatchingFields{"app": "y"})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2))

	// As a cache: a field nobody indexed, or an inexact match, is an error,
	// not a silent list of everything.
	g.Expect(m.List(t.Context(), list, client.MatchingFields{"spec.nodeName": "n1"})).To(MatchError(ContainSubstring(`no index on Pod by "spec.nodeName"`)))
	g.Expect(m.List(t.Context(), list, &client.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("app", "x")})).To(MatchError(ContainSubstring("only exact matches")))
}

func TestEventsFollowWatchesAndPredicates(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	watches := []Watch{
		{Kind: &corev1.ConfigMap{}, Predicate: predicate.GenerationChangedPredicate{}},
		{Kind: &corev1.Secret{}, Map: OwnedBy("ConfigMap")},
	}
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", OwnerReferences: []metav1.OwnerReference{
		{Kind: "ConfigMap", Name: "root", Controller: ptr.To(true)},
	}}}
	keys, err := eventsFor(scheme, watches, change{new: owned})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(Equal([]requestKey{{Namespace: "ns", Name: "root"}}))

	oldCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root", Generation: 1}}
	sameGen := oldCM.DeepCopy()
	sameGen.Labels = map[string]string{"x": "y"}
	keys, err = eventsFor(scheme, watches, change{old: oldCM, new: sameGen})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(BeEmpty(), "the predicate filters an update that keeps the generation")
}

func TestNormalisationIgnoresOrderAndVolatileFields(t *testing.T) {
	g := NewWithT(t)
	a := map[string]any{"metadata": map[string]any{"resourceVersion": "7", "name": "x"},
		"conditions": []any{map[string]any{"type": "B", "lastTransitionTime": "t1"}, map[string]any{"type": "A"}},
		"members":    []any{map[string]any{"name": "m", "id": "1"}}}
	b := map[string]any{"metadata": map[string]any{"resourceVersion": "9", "name": "x"},
		"conditions": []any{map[string]any{"type": "A"}, map[string]any{"type": "B", "lastTransitionTime": "t2"}},
		"members":    []any{map[string]any{"name": "m", "id": "2"}}}
	strip(a, []string{"id"})
	strip(b, []string{"id"})
	g.Expect(a).To(Equal(b))
}

// A toy operator with a crash-only bug: it marks the root done before it
// creates the child, so a crash between the two writes leaves a lie.
type toy struct{ c client.Client }

func (r *toy) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	root := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, req.NamespacedName, root); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if root.Annotations["done"] != "true" {
		root.Annotations = map[string]string{"done": "true"}
		if err := r.c.Update(ctx, root); err != nil {
			return reconcile.Result{}, err
		}
	}
	child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: root.Namespace, Name: root.Name + "-child"}}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(child), child); apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.c.Create(ctx, child)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

func toyTarget(t *testing.T) Target {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "ns", Name: "root"}
	return Target{
		Name:    "toy",
		Scheme:  scheme,
		Watches: []Watch{{Kind: &corev1.ConfigMap{}}},
		Setup: func(ctx context.Context, w *World) (*Hooks, error) {
			if err := w.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"}}); err != nil {
				return nil, err
			}
			return &Hooks{
				NewReconciler: func(c client.Client) reconcile.Reconciler { return &toy{c: c} },
				Roots: func(context.Context) ([]reconcile.Request, error) {
					return []reconcile.Request{{NamespacedName: key}}, nil
				},
				Kinds: []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}},
				Invariants: []Invariant{{Name: "done means the child exists", Kind: Honesty, Check: func(ctx context.Context, _ StepInfo) error {
					root := &corev1.ConfigMap{}
					if err := w.Client.Get(ctx, key, root); err != nil {
						return err
					}
					if root.Annotations["done"] != "true" {
						return nil
					}
					if err := w.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "root-child"}, &corev1.Secret{}); err != nil {
						return fmt.Errorf("root says done but: %w", err)
					}
					return nil
				}}},
			}, nil
		},
	}
}

func TestRunSeedsFindsAndShrinksACrashOnlyBug(t *testing.T) {
	g := NewWithT(t)
	target := toyTarget(t)
	// Without faults the bug never shows.
	for seed := uint64(1); seed <= 20; seed++ {
		res, err := Run(t.Context(), target, Generate(seed, Config{}).WithoutFaults(), Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Violation).To(BeNil(), "seed %d without faults", seed)
	}
	failure, ran, err := RunSeeds(t.Context(), target, 1, 200, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(failure).NotTo(BeNil(), "not found in %d schedules", ran)
	shrunk, err := Shrink(t.Context(), target, failure, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	faults := shrunk.Schedule.Faults()
	g.Expect(faults).To(HaveLen(1), "shrunk to the single fault that matters")
	f := shrunk.Schedule.Actions[faults[0]].Fault
	g.Expect(f.Kind).To(BeElementOf(Crash, APIError), "a crash or a failed call between the two writes: %s", f)
	t.Logf("found after %d schedules at seed %d; %d faults shrunk to 1: %s", ran, failure.Schedule.Seed, len(failure.Schedule.Faults()), f)
	g.Expect(FormatFailure(shrunk, "replay")).To(ContainSubstring("minimal faults (1)"))
	g.Expect(errors.Is(ErrCrashed, ErrCrashed)).To(BeTrue())
}

func TestRunSeedsTalliesWhatRunsNote(t *testing.T) {
	g := NewWithT(t)
	target := toyTarget(t)
	target.Name = "toy-noting"
	inner := target.Setup
	target.Setup = func(ctx context.Context, w *World) (*Hooks, error) {
		h, err := inner(ctx, w)
		if err != nil {
			return nil, err
		}
		h.Perturbations = []Perturbation{{Name: "note", Apply: func(context.Context, uint64) (string, error) {
			w.Note("perturbed")
			return "noted", nil
		}}}
		return h, nil
	}
	// (Almost) no faults: the toy's bug needs one, and exploring must not
	// stop early.
	cfg := Config{FaultRate: 1e-9}
	tally := &Tally{}
	failure, ran, err := RunSeeds(t.Context(), target, 1, 40, Options{Config: cfg, Tally: tally})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(failure).To(BeNil())
	g.Expect(ran).To(Equal(40))

	// Each seed counts once, whatever number of times it noted.
	cfg.Perturbations = 1
	perturbed, perturbations := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		n := 0
		for _, a := range Generate(seed, cfg).Actions {
			if a.Kind == Perturb {
				n++
			}
		}
		if n > 0 {
			perturbed++
		}
		perturbations += n
	}
	g.Expect(perturbed).To(BeNumerically(">", 0))
	g.Expect(tally.Runs()).To(Equal(40))
	g.Expect(tally.Schedules("perturbed")).To(Equal(perturbed))
	g.Expect(tally.Times("perturbed")).To(Equal(perturbations))
	g.Expect(tally.Schedules("never noted")).To(BeZero())
	g.Expect(tally.String()).To(ContainSubstring("perturbed"))
}
