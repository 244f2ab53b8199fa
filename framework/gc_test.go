package framework

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A set deleted with propagation Orphan (the API server's "orphan"
// finalizer) leaves its pods, no longer owned, and goes; a set made again
// with the same selector adopts them rather than making others.
func TestGarbageCollectorOrphansAndTheSetAdopts(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set, c, sim, gc := deletingSet(t, 2, metav1.FinalizerOrphanDependents)

	g.Expect(c.Delete(ctx, set)).To(Succeed())
	g.Expect(gc.Step(ctx)).To(BeTrue())
	err := c.Get(ctx, client.ObjectKeyFromObject(set), &appsv1.StatefulSet{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the set goes once its pods no longer name it: %v", err)
	pods := &corev1.PodList{}
	g.Expect(c.List(ctx, pods, client.InNamespace("ns"))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(2), "the pods stay")
	for _, p := range pods.Items {
		g.Expect(p.OwnerReferences).To(BeEmpty(), p.Name)
	}
	g.Expect(gc.Step(ctx)).To(BeFalse(), "an orphan with no owner is no one's to collect")

	again := newSet(2)
	again.UID = "sts-uid-2"
	g.Expect(c.Create(ctx, again)).To(Succeed())
	g.Expect(sim.Settle(ctx, 10)).To(Succeed())
	g.Expect(c.List(ctx, pods, client.InNamespace("ns"))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(2))
	for _, p := range pods.Items {
		g.Expect(metav1.IsControlledBy(&p, again)).To(BeTrue(), "%s adopted", p.Name)
	}
}

// A set deleted in the foreground ("foregroundDeletion") goes once its
// pods are gone.
func TestGarbageCollectorForeground(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set, c, _, gc := deletingSet(t, 1, metav1.FinalizerDeleteDependents)

	g.Expect(c.Delete(ctx, set)).To(Succeed())
	g.Expect(gc.Step(ctx)).To(BeTrue())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(set), &appsv1.StatefulSet{})).To(Succeed(), "its pod went in this step; the set waits for the next")
	pods := &corev1.PodList{}
	g.Expect(c.List(ctx, pods, client.InNamespace("ns"))).To(Succeed())
	g.Expect(pods.Items).To(BeEmpty())
	g.Expect(gc.Step(ctx)).To(BeTrue())
	err := c.Get(ctx, client.ObjectKeyFromObject(set), &appsv1.StatefulSet{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}

// deletingSet is a set of replicas pods, made, whose deletion waits on
// finalizer, with the simulator and a collector of sets and pods.
func deletingSet(t *testing.T, replicas int32, finalizer string) (*appsv1.StatefulSet, client.Client, *StatefulSetSimulator, *GarbageCollector) {
	t.Helper()
	set := newSet(replicas)
	set.Finalizers = []string{finalizer}
	c := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{set}})
	sim := &StatefulSetSimulator{Client: c, Namespace: "ns"}
	if err := sim.Settle(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	return set, c, sim, &GarbageCollector{Client: c, Kinds: []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.PodList{}}}
}
