package unit

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

func TestAPIErrorsAreReturnedForBackoff(t *testing.T) {
	cases := []struct {
		name  string
		fault framework.Fault
		is    func(error) bool
	}{
		{"apply StatefulSet 500", framework.Fault{Verb: "apply", Kind: "StatefulSet", Err: framework.ErrInternal}, apierrors.IsInternalError},
		{"apply Service timeout", framework.Fault{Verb: "apply", Kind: "Service", Err: framework.ErrServerTimeout}, apierrors.IsServerTimeout},
		{"get PodDisruptionBudget 429", framework.Fault{Verb: "get", Kind: "PodDisruptionBudget", Err: framework.ErrTooManyRequests}, apierrors.IsTooManyRequests},
		{"list Pods 500", framework.Fault{Verb: "list", Kind: "Pod", Err: framework.ErrInternal}, apierrors.IsInternalError},
		{"status patch conflict", framework.Fault{Verb: "patch/status", Kind: "DatabaseCluster", Err: framework.ErrConflict("databaseclusters", "db")}, apierrors.IsConflict},
		{"finalizer patch conflict", framework.Fault{Verb: "patch", Kind: "DatabaseCluster", Err: framework.ErrConflict("databaseclusters", "db")}, apierrors.IsConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			c := reference.NewCluster("default", "db").Build()
			w := reference.NewWorld(t, c)
			if tc.fault.Verb != "patch" {
				w.AddFinalizer(t, c) // the faults below strike the pass that creates the children
			}
			w.Faults.Add(tc.fault)

			errorsBefore := outcomeCount(t, w, "error")
			_, err := w.Reconciler.Reconcile(ctx, reference.Request(c))
			g.Expect(err).To(HaveOccurred())
			g.Expect(tc.is(err)).To(BeTrue(), "the API error must stay inspectable through wrapping: %v", err)
			g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(BeFalse(), "API errors are retried, not terminal")
			g.Expect(w.Faults.Injected()).To(BeNumerically(">=", 1))
			g.Expect(outcomeCount(t, w, "error")).To(Equal(errorsBefore+1), framework.DescribeSeries(w.Registry, operator.MetricReconcileDuration))

			g.Expect(w.Get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ObservedGeneration).To(BeZero(), "observedGeneration is stamped only by a successful pass")

			// Once the API recovers, the cluster converges.
			w.Faults.Clear()
			settle(t, w, c)
			g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))
			g.Expect(outcomeCount(t, w, "success") + outcomeCount(t, w, "requeue")).To(BeNumerically(">", 0))
		})
	}
}

func TestInvalidSpecIsTerminal(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*dbv1.DatabaseCluster)
		field  string
	}{
		{"replicas zero", func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](0) }, "spec.replicas"},
		{"replicas ten", func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](10) }, "spec.replicas"},
		{"replicas unset", func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = nil }, "spec.replicas"},
		{"empty image", func(c *dbv1.DatabaseCluster) { c.Spec.Image = "" }, "spec.image"},
		{"zero storage", func(c *dbv1.DatabaseCluster) { c.Spec.Storage.Size.Set(0) }, "spec.storage.size"},
		{"unknown deletion policy", func(c *dbv1.DatabaseCluster) { c.Spec.DeletionPolicy = "Archive" }, "spec.deletionPolicy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			c := reference.NewCluster("default", "db").Build()
			tc.mutate(c)
			w := reference.NewWorld(t, c)

			_, err := w.Reconciler.Reconcile(ctx, reference.Request(c))
			g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(BeTrue(), "got %v", err)
			g.Expect(err).To(MatchError(ContainSubstring(tc.field)))
			g.Expect(outcomeCount(t, w, "terminal")).To(BeEquivalentTo(1))

			g.Expect(w.Get(ctx, c)).To(Succeed())
			g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonInvalidSpec).WithMessageContaining(tc.field))
			for _, wr := range w.Writes.All() {
				g.Expect(wr.Kind).To(Equal("DatabaseCluster"), "no child may be written from an invalid spec: %s", wr)
			}
		})
	}
}

func outcomeCount(t *testing.T, w *reference.World, outcome string) float64 {
	t.Helper()
	v, _, err := framework.MetricValue(w.Registry, operator.MetricReconcileDuration, map[string]string{"outcome": outcome})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
