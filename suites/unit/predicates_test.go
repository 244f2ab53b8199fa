package unit

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// TestStatefulSetPredicate drives the controller from StatefulSet update
// events filtered by a predicate, as the manager's watch would, while pods
// become ready. The scaffolds' GenerationChangedPredicate drops every one of
// those status-only updates and leaves status.readyReplicas stale; the
// operator's predicate lets the readiness changes through.
func TestStatefulSetPredicate(t *testing.T) {
	cases := []struct {
		name       string
		predicate  predicate.Predicate
		wantStale  bool
		reconciles func(int) bool
	}{
		{name: "GenerationChangedPredicate leaves status stale", predicate: predicate.GenerationChangedPredicate{},
			wantStale: true, reconciles: func(n int) bool { return n == 0 }},
		{name: "StatefulSetReadinessChanged keeps status fresh", predicate: operator.StatefulSetReadinessChanged(),
			wantStale: false, reconciles: func(n int) bool { return n > 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			c := reference.NewCluster("default", "db").Build()
			w := reference.NewWorld(t, c)
			w.Sim.SetReady(false, c.Namespace, "db-0", "db-1", "db-2")
			settle(t, w, c)
			g.Expect(c.Status.ReadyReplicas).To(BeZero())

			// Pods become ready; each StatefulSet write is an update event.
			w.Sim.SetReady(true, c.Namespace, "db-0", "db-1", "db-2")
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}}
			reconciles := 0
			for step := 0; step < 10; step++ {
				g.Expect(w.Get(ctx, sts)).To(Succeed())
				old := sts.DeepCopy()
				changed, err := w.Sim.Step(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				_, err = w.Processes.Step(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				if !changed {
					break
				}
				g.Expect(w.Get(ctx, sts)).To(Succeed())
				if old.ResourceVersion != sts.ResourceVersion && tc.predicate.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: sts.DeepCopy()}) {
					reconciles++
					_, err := w.Reconciler.Reconcile(ctx, reference.Request(c))
					g.Expect(err).NotTo(HaveOccurred())
				}
			}
			g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(3), "the simulated pods did not become ready")
			g.Expect(w.Get(ctx, c)).To(Succeed())
			t.Logf("%s: %d reconciles, status.readyReplicas=%d, StatefulSet readyReplicas=%d",
				tc.name, reconciles, c.Status.ReadyReplicas, sts.Status.ReadyReplicas)
			g.Expect(tc.reconciles(reconciles)).To(BeTrue(), "reconciles triggered: %d", reconciles)
			if tc.wantStale {
				g.Expect(c.Status.ReadyReplicas).To(BeZero(), "expected the naive predicate to leave status stale")
				g.Expect(c).NotTo(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, ""))
			} else {
				g.Expect(c.Status.ReadyReplicas).To(Equal(sts.Status.ReadyReplicas))
				g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))
			}
		})
	}
}

// TestClusterChangedPredicate drives the DatabaseCluster watch's predicate
// with the updates a new cluster's life produces: the finalizer pass's own
// update must start the pass that creates the children (nothing else would:
// the generation did not move), the status writes must start none, and a
// spec change or the start of deletion must start one.
func TestClusterChangedPredicate(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := operator.ClusterChanged()
	c := reference.NewCluster("default", "db").Build()
	w := reference.NewWorld(t, c)
	passes := func(old, cur *dbv1.DatabaseCluster) bool {
		return p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur})
	}
	g.Expect(p.Create(event.CreateEvent{Object: c})).To(BeTrue(), "a new cluster starts a pass")

	before := c.DeepCopy()
	w.AddFinalizer(t, c)
	g.Expect(passes(before, c)).To(BeTrue(), "the finalizer's arrival must start the creating pass")
	g.Expect(c.Generation).To(Equal(before.Generation), "adding a finalizer does not move the generation")

	before = c.DeepCopy()
	_, err := w.Reconciler.Reconcile(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c.Status.Conditions).NotTo(BeEmpty(), "the creating pass writes status")
	g.Expect(passes(before, c)).To(BeFalse(), "the controller's own status write must not start a pass")

	before = c.DeepCopy()
	c.Spec.Replicas = ptr.To[int32](5)
	c.Generation++
	g.Expect(passes(before, c)).To(BeTrue(), "a spec change starts a pass")

	before = c.DeepCopy()
	c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	g.Expect(passes(before, c)).To(BeTrue(), "the start of deletion starts a pass")

	// Removing the finalizer (the end of deletion) is not an arrival.
	before = c.DeepCopy()
	c.Finalizers = nil
	g.Expect(passes(before, c)).To(BeFalse())
}
