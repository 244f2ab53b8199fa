package unit

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

func TestCreateConvergesToAvailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := reference.NewWorld(t, c)

	passes, err := w.Driver.ReconcileUntilStable(ctx, reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("settled after %d passes", len(passes))

	g.Expect(w.Get(ctx, c)).To(Succeed())
	g.Expect(c.Finalizers).To(ContainElement(dbv1.Finalizer))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy).WithObservedGeneration(c.Generation))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled))
	g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
	g.Expect(c.Status.Replicas).To(BeEquivalentTo(3))
	g.Expect(c.Status.ReadyReplicas).To(BeEquivalentTo(3))
	g.Expect(c.Status.Members).To(HaveLen(3))
	leaders := 0
	for _, m := range c.Status.Members {
		g.Expect(m.Healthy).To(BeTrue(), "member %s", m.Name)
		g.Expect(m.ID).NotTo(BeEmpty(), "member %s", m.Name)
		if m.Leader {
			leaders++
		}
	}
	g.Expect(leaders).To(Equal(1))

	owner := metav1.OwnerReference{APIVersion: dbv1.GroupVersion.String(), Kind: "DatabaseCluster", Name: c.Name, UID: c.UID}
	for _, child := range []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.HeadlessServiceName(c)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.ClientServiceName(c)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.PDBName(c)}},
	} {
		g.Expect(w.Get(ctx, child)).To(Succeed(), "%T %s", child, child.GetName())
		g.Expect(metav1.IsControlledBy(child, c)).To(BeTrue(), "%T %s owners %v", child, child.GetName(), child.GetOwnerReferences())
		g.Expect(child.GetOwnerReferences()[0]).To(And(
			HaveField("APIVersion", owner.APIVersion), HaveField("Kind", owner.Kind), HaveField("Name", owner.Name),
			HaveField("BlockOwnerDeletion", HaveValue(BeTrue()))))
	}

	g.Expect(w.Driver.ExpectIdempotent(ctx, reference.Request(c))).To(Succeed())
}
