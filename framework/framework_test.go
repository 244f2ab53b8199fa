package framework

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestHaveCondition(t *testing.T) {
	g := NewWithT(t)
	conds := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllGood", Message: "3 of 3 ready", ObservedGeneration: 4},
		{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "Fine"},
	}
	g.Expect(conds).To(HaveCondition("Ready", metav1.ConditionTrue, "AllGood"))
	g.Expect(conds).To(HaveCondition("Ready", metav1.ConditionTrue, "").WithObservedGeneration(4).WithMessageContaining("3 of 3"))
	g.Expect(conds).NotTo(HaveCondition("Ready", metav1.ConditionTrue, "AllGood").WithObservedGeneration(5))
	g.Expect(conds).NotTo(HaveCondition("Ready", metav1.ConditionFalse, ""))
	g.Expect(conds).NotTo(HaveCondition("Missing", metav1.ConditionTrue, ""))

	m := HaveCondition("Ready", metav1.ConditionFalse, "Broken")
	ok, err := m.Match(conds)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	msg := m.FailureMessage(conds)
	g.Expect(msg).To(ContainSubstring("expected condition Ready=False reason=Broken"))
	g.Expect(msg).To(ContainSubstring("Ready=True reason=AllGood observedGeneration=4: 3 of 3 ready"), "the failure lists what the object has")

	_, err = m.Match("not conditions")
	g.Expect(err).To(HaveOccurred())
}

func newSet(replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": "x"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: types.UID("sts-uid"), Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
			},
		},
	}
}

func TestStatefulSetSimulator(t *testing.T) {
	t.Run("label selector reads", func(t *testing.T) { testStatefulSetSimulator(t, false) })
	t.Run("cached reads by index", func(t *testing.T) { testStatefulSetSimulator(t, true) })
}

func testStatefulSetSimulator(t *testing.T, cached bool) {
	g := NewWithT(t)
	ctx := t.Context()
	set := newSet(3)
	set.UID = "set-uid"
	o := FakeClientOptions{Objects: []client.Object{set}}
	if cached {
		o.Indexes = []FieldIndex{PodControllerIndex}
	}
	c := NewFakeClient(clientgoscheme.Scheme, o)
	sim := &StatefulSetSimulator{Client: c, Namespace: "ns", CachedReads: cached}
	sts := &appsv1.StatefulSet{}
	key := client.ObjectKey{Namespace: "ns", Name: "x"}

	// First step creates pods, not ready; the next makes them ready.
	changed, err := sim.Step(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	g.Expect(c.Get(ctx, key, sts)).To(Succeed())
	g.Expect(sts.Status.Replicas).To(BeEquivalentTo(3))
	g.Expect(sts.Status.ReadyReplicas).To(BeZero())
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())
	g.Expect(c.Get(ctx, key, sts)).To(Succeed())
	g.Expect(sts.Status).To(And(HaveField("ReadyReplicas", BeEquivalentTo(3)), HaveField("UpdatedReplicas", BeEquivalentTo(3)),
		HaveField("ObservedGeneration", BeEquivalentTo(1)), HaveField("CurrentRevision", Revision(sts))))

	// A settled world writes nothing.
	changed, err = sim.Step(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeFalse())

	// An unready pod shows in status.
	sim.SetReady(false, "ns", "x-1")
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())
	g.Expect(c.Get(ctx, key, sts)).To(Succeed())
	g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(2))
	sim.SetReady(true, "ns", "x-1")
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())

	// A template change rolls one pod per step, highest ordinal first.
	g.Expect(c.Get(ctx, key, sts)).To(Succeed())
	sts.Spec.Template.Spec.Containers[0].Image = "img:2"
	sts.Generation = 2
	g.Expect(c.Update(ctx, sts)).To(Succeed())
	newRev := Revision(sts)
	var order []string
	for range 20 {
		changed, err := sim.Step(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		pods := &corev1.PodList{}
		g.Expect(c.List(ctx, pods, client.InNamespace("ns"))).To(Succeed())
		notReady := 0
		for _, p := range pods.Items {
			if !PodReady(&p) {
				notReady++
			}
			if p.Labels[appsv1.ControllerRevisionHashLabelKey] == newRev && !slices.Contains(order, p.Name) {
				order = append(order, p.Name)
			}
		}
		g.Expect(notReady).To(BeNumerically("<=", 1), "more than one pod down during the roll")
		if !changed {
			break
		}
	}
	g.Expect(order).To(Equal([]string{"x-2", "x-1", "x-0"}))
	g.Expect(c.Get(ctx, key, sts)).To(Succeed())
	g.Expect(sts.Status.CurrentRevision).To(Equal(newRev))

	// Scale down deletes the highest ordinals.
	sts.Spec.Replicas = ptr.To[int32](1)
	g.Expect(c.Update(ctx, sts)).To(Succeed())
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())
	pods := &corev1.PodList{}
	g.Expect(c.List(ctx, pods, client.InNamespace("ns"))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	g.Expect(pods.Items[0].Name).To(Equal("x-0"))
}

// flipper writes a ConfigMap on every pass, like two controllers fighting
// over one field.
type flipper struct {
	c     client.Client
	calls int
}

func (f *flipper) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	f.calls++
	cm := &corev1.ConfigMap{}
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, cm); err != nil {
		return reconcile.Result{}, err
	}
	cm.Data = map[string]string{"owner": strconv.Itoa(f.calls % 2)}
	return reconcile.Result{}, f.c.Update(ctx, cm)
}

// converger writes once, then never again.
type converger struct{ c client.Client }

func (r *converger) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, cm); err != nil {
		return reconcile.Result{}, err
	}
	if cm.Data["done"] == "yes" {
		return reconcile.Result{}, nil
	}
	cm.Data = map[string]string{"done": "yes"}
	return reconcile.Result{}, r.c.Update(ctx, cm)
}

// A withheld pod, once deleted, stays gone (its set counts it missing)
// until restored, as a controller that has not acted yet.
func TestStatefulSetSimulatorWithholds(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set := newSet(3)
	set.UID = "set-uid"
	c := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{set}})
	sim := &StatefulSetSimulator{Client: c, Namespace: "ns"}
	key := client.ObjectKey{Namespace: "ns", Name: "x"}
	sts := &appsv1.StatefulSet{}
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())

	sim.Withhold("ns", "x-0")
	g.Expect(c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x-0"}})).To(Succeed())
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "x-0"}, &corev1.Pod{}))).To(BeTrue(), "x-0 made again while withheld")
	g.Expect(c.Get(ctx, key, sts)).To(Succeed())
	g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(2))

	sim.Restore("ns", "x-0")
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())
	g.Expect(c.Get(ctx, key, sts)).To(Succeed())
	g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(3))
}

func TestDriverDetectsHotLoopsWithADiff(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	fake := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}},
	}})
	log := &WriteLog{}
	d := &Driver{Reconciler: &flipper{c: log.Wrap(fake)}, Writes: log, Client: fake, Namespace: "ns",
		Kinds: []client.ObjectList{&corev1.ConfigMapList{}}, MaxPasses: 5}

	passes, err := d.ReconcileUntilStable(ctx, reconcile.Request{})
	g.Expect(passes).To(HaveLen(5))
	g.Expect(err).To(MatchError(ContainSubstring("not stable after 5 passes")))
	g.Expect(err).To(MatchError(ContainSubstring("update ConfigMap ns/cm")), "names the write")
	// go-cmp randomises its diff's spacing (it may use non-breaking spaces),
	// so match any kind of space.
	g.Expect(err).To(MatchError(MatchRegexp(`-[\s\p{Zs}]+owner: "\d"`)), "diffs the flipping field")
	g.Expect(d.ExpectIdempotent(ctx, reconcile.Request{})).To(MatchError(ContainSubstring("not idempotent")))

	d.Reconciler = &converger{c: log.Wrap(fake)}
	passes, err = d.ReconcileUntilStable(ctx, reconcile.Request{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(passes).To(HaveLen(2), "one pass writes, the next settles")
	g.Expect(d.ExpectIdempotent(ctx, reconcile.Request{})).To(Succeed())
}

func TestFaultsAndWriteLog(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	fake := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{})
	faults := &Faults{}
	log := &WriteLog{}
	c := log.Wrap(faults.Client(fake))

	faults.Add(Fault{Verb: "create", Kind: "ConfigMap", Err: ErrInternal, Times: 1})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	g.Expect(apierrors.IsInternalError(c.Create(ctx, cm))).To(BeTrue())
	g.Expect(c.Create(ctx, cm)).To(Succeed(), "a fault with Times: 1 is spent after one call")
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})).To(Succeed(), "other kinds pass")
	g.Expect(faults.Injected()).To(Equal(1))

	faults.Add(Fault{Verb: "get", Err: ErrTooManyRequests})
	g.Expect(apierrors.IsTooManyRequests(c.Get(ctx, client.ObjectKeyFromObject(cm), cm))).To(BeTrue())
	g.Expect(fake.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed(), "the unwrapped client is not affected")
	faults.Clear()
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())

	g.Expect(FormatWrites(log.All())).To(Equal("  create ConfigMap ns/a\n  create ConfigMap ns/a\n  create Secret ns/s"))
	g.Expect(errors.Is(ErrConflict("configmaps", "a"), ErrConflict("configmaps", "a"))).To(BeFalse())
}

func TestMetricValue(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"k"})
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
	reg.MustRegister(counter, hist)
	counter.WithLabelValues("a").Add(3)
	hist.Observe(1)
	hist.Observe(2)

	v, found, err := MetricValue(reg, "c_total", map[string]string{"k": "a"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(v).To(Equal(3.0))
	v, found, _ = MetricValue(reg, "c_total", map[string]string{"k": "b"})
	g.Expect(found).To(BeFalse())
	g.Expect(v).To(BeZero())
	v, _, _ = MetricValue(reg, "h_seconds", nil)
	g.Expect(v).To(Equal(2.0), "a histogram reads as its sample count")
	g.Expect(DescribeSeries(reg, "c_total")).To(ContainSubstring("c_total{k=a}"))
}

// A pod admission refuses is reported once, as the StatefulSet controller
// does, in a FailedCreate event on the set that carries the refusal.
func TestStatefulSetSimulatorReportsRefusedPods(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set := newSet(1)
	set.UID = "set-uid"
	refusal := apierrors.NewForbidden(corev1.Resource("pods"), "x-0", errors.New(`violates PodSecurity "restricted:latest": runAsNonRoot != true`))
	c := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{set}, Interceptors: &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				return refusal
			}
			return c.Create(ctx, obj, opts...)
		},
	}})
	sim := &StatefulSetSimulator{Client: c, Namespace: "ns"}
	for range 3 {
		_, err := sim.Step(ctx)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "step error %v", err)
	}
	events := &corev1.EventList{}
	g.Expect(c.List(ctx, events, client.InNamespace("ns"))).To(Succeed())
	g.Expect(events.Items).To(ConsistOf(And(
		HaveField("Reason", "FailedCreate"), HaveField("Type", corev1.EventTypeWarning),
		HaveField("InvolvedObject.Name", "x"), HaveField("InvolvedObject.Kind", "StatefulSet"),
		HaveField("Message", ContainSubstring(`pods "x-0" is forbidden: violates PodSecurity`)))))
}

// CRDPath finds a path relative to the module root from any folder in it,
// and takes an absolute one as it is (gauntlet images prints absolute kind
// configs).
func TestCRDPath(t *testing.T) {
	g := NewWithT(t)
	rel := CRDPath("go.mod")
	g.Expect(filepath.IsAbs(rel)).To(BeTrue())
	g.Expect(rel).To(BeAnExistingFile())
	g.Expect(CRDPath(rel)).To(Equal(rel))
}
