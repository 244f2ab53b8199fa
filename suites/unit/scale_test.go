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

func TestScale(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := converged(t, c)

	for _, step := range []struct{ replicas, quorum int32 }{{5, 3}, {3, 2}} {
		update(t, w, c, func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = &step.replicas })

		// The first pass after the change says what it is doing.
		_, err := w.Driver.Pass(ctx, reference.Request(c))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w.Get(ctx, c)).To(Succeed())
		g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonScaling).WithObservedGeneration(c.Generation))

		settle(t, w, c)
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.PDBName(c)}}
		g.Expect(w.Get(ctx, sts)).To(Succeed())
		g.Expect(w.Get(ctx, pdb)).To(Succeed())
		g.Expect(*sts.Spec.Replicas).To(Equal(step.replicas))
		g.Expect(pdb.Spec.MinAvailable.IntValue()).To(BeEquivalentTo(step.quorum))
		g.Expect(c.Status.ReadyReplicas).To(Equal(step.replicas))
		g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled))
		g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy).WithObservedGeneration(c.Generation))
		g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
	}
}

func TestImageChangeRollsOneMemberAtATime(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := converged(t, c)

	const newImage = "gauntlet.dev/etcd:v3.6.17"
	update(t, w, c, func(c *dbv1.DatabaseCluster) { c.Spec.Image = newImage })

	sawRolling := false
	for pass := 0; ; pass++ {
		g.Expect(pass).To(BeNumerically("<", 30), "the roll did not finish")
		p, err := w.Driver.Pass(ctx, reference.Request(c))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w.Get(ctx, c)).To(Succeed())
		if ok, _ := framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonRollingUpdate).Match(c); ok {
			sawRolling = true
		}
		// Never more than one member down while rolling.
		g.Expect(c.Status.ReadyReplicas).To(BeNumerically(">=", 2), "pass %d", pass)
		if p.Settled() {
			break
		}
	}
	g.Expect(sawRolling).To(BeTrue(), "Progressing never said RollingUpdate")

	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}}
	g.Expect(w.Get(ctx, sts)).To(Succeed())
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal(newImage))
	g.Expect(sts.Status.UpdatedReplicas).To(BeEquivalentTo(3))
	// OnDelete: the StatefulSet controller leaves currentRevision behind
	// (as the real one does); every pod runs the update revision.
	g.Expect(sts.Status.CurrentRevision).NotTo(Equal(sts.Status.UpdateRevision))
	pods := &corev1.PodList{}
	g.Expect(w.Client.List(ctx, pods, client.InNamespace(c.Namespace))).To(Succeed())
	for _, p := range pods.Items {
		g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(sts.Status.UpdateRevision), "pod %s", p.Name)
	}
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy).WithObservedGeneration(c.Generation))
}
