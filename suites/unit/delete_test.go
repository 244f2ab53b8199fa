package unit

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/framework"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

func TestDeleteWithSnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := converged(t, c)
	w.Snapshots.InProgressFor(2)

	g.Expect(w.Client.Delete(ctx, c)).To(Succeed())
	var recorded *dbv1.SnapshotStatus
	for pass := 0; ; pass++ {
		g.Expect(pass).To(BeNumerically("<", 10), "deletion did not finish")
		_, err := w.Driver.Pass(ctx, reference.Request(c))
		g.Expect(err).NotTo(HaveOccurred())
		if err := w.Get(ctx, c); apierrors.IsNotFound(err) {
			break
		}
		g.Expect(c.Finalizers).To(ContainElement(dbv1.Finalizer), "pass %d", pass)
		if c.Status.LastSnapshot != nil {
			recorded = c.Status.LastSnapshot
		} else {
			g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonDeleting))
		}
	}
	g.Expect(recorded).NotTo(BeNil(), "the finalizer went before the snapshot was recorded in status")
	g.Expect(recorded.Location).To(ContainSubstring("db"))
	g.Expect(w.Snapshots.Calls()).To(Equal(3), "two in-progress answers, then the snapshot")
	g.Expect(drainEvents(w)).To(ContainElement(ContainSubstring("SnapshotTaken")))
}

func TestDeleteKeepsFinalizerWhileSnapshotFails(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := converged(t, c)
	w.Snapshots.FailWith(errors.New("no member answered"))

	g.Expect(w.Client.Delete(ctx, c)).To(Succeed())
	for range 3 {
		_, err := w.Reconciler.Reconcile(ctx, reference.Request(c))
		g.Expect(err).To(MatchError(ContainSubstring("no member answered")), "a failed snapshot goes back to the workqueue for backoff")
	}
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c.Finalizers).To(ContainElement(dbv1.Finalizer))
	g.Expect(c.Status.LastSnapshot).To(BeNil())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonSnapshotFailed).WithMessageContaining("no member answered"))
	g.Expect(drainEvents(w)).To(ContainElement(And(ContainSubstring("Warning"), ContainSubstring("SnapshotFailed"))))

	// Once the snapshot works, the deletion completes.
	w.Snapshots.FailWith(nil)
	_, err := w.Driver.ReconcileUntilStable(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsNotFound(w.Get(ctx, c))).To(BeTrue())
}

func TestDeleteWithoutSnapshotter(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := converged(t, c)
	w.Reconciler.Snapshotter = nil

	g.Expect(w.Client.Delete(ctx, c)).To(Succeed())
	_, err := w.Reconciler.Reconcile(ctx, reference.Request(c))
	g.Expect(err).To(MatchError(ContainSubstring("no snapshotter")))
	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c.Finalizers).To(ContainElement(dbv1.Finalizer), "nothing is deleted without a snapshot")
}

func TestDeleteWithDeletePolicySkipsSnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	w := converged(t, c)

	g.Expect(w.Client.Delete(ctx, c)).To(Succeed())
	_, err := w.Driver.ReconcileUntilStable(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsNotFound(w.Get(ctx, c))).To(BeTrue(), "the finalizer was not released")
	g.Expect(w.Snapshots.Calls()).To(BeZero())
}

func TestNotFoundIsNotAnError(t *testing.T) {
	g := NewWithT(t)
	c := reference.NewCluster("default", "gone").Build()
	w := reference.NewWorld(t)
	res, err := w.Reconciler.Reconcile(t.Context(), reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.IsZero()).To(BeTrue())
	g.Expect(w.Writes.All()).To(BeEmpty())
}
