package integration

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

func TestCreateAvailableDegraded(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "lifecycle-")
	c := reference.NewCluster(ns, "db").WithoutUID().Build()
	create(t, c)

	// Children with controller owner references, and the finalizer.
	waitForCluster(t, c, "the finalizer", func(c *dbv1.DatabaseCluster) bool {
		return len(c.Finalizers) > 0 && c.Finalizers[0] == dbv1.Finalizer
	})
	for _, child := range []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.StatefulSetName(c)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.HeadlessServiceName(c)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.ClientServiceName(c)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.PDBName(c)}},
	} {
		err := framework.PollFor(ctx, child.GetName()+" to exist", convergeTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(child), child)
			return err == nil, errString(err), nil
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(metav1.IsControlledBy(child, c)).To(BeTrue(), "%T %s owners: %v", child, child.GetName(), child.GetOwnerReferences())
	}

	// The simulated kubelets make the pods ready: Available, with reason and
	// generation, and readyReplicas from the StatefulSet once it reports them.
	waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy).WithObservedGeneration(c.Generation))
	waitForCluster(t, c, "readyReplicas 3", func(c *dbv1.DatabaseCluster) bool { return c.Status.ReadyReplicas == 3 })
	g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))

	// A member going unready turns Degraded on, and back off when it recovers.
	sim.SetReady(false, ns, operator.MemberName(c, 1))
	waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonMembersUnhealthy).WithMessageContaining("db-1"))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))
	sim.SetReady(true, ns, operator.MemberName(c, 1))
	waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy))
}

func TestStatusSubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "subresource-")
	c := reference.NewCluster(ns, "db").WithoutUID().Build()
	create(t, c)
	waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))

	// A spec update cannot change status (retried if the operator wrote
	// status in between: optimistic concurrency is not what is tested here).
	edited := &dbv1.DatabaseCluster{}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), edited); err != nil {
			return err
		}
		edited.Spec.Image = "gauntlet.dev/etcd:v3.6.15"
		edited.Status.ReadyReplicas = 42
		return env.Client.Update(ctx, edited)
	})).To(Succeed())
	g.Expect(edited.Spec.Image).To(Equal("gauntlet.dev/etcd:v3.6.15"))
	g.Expect(edited.Status.ReadyReplicas).NotTo(BeEquivalentTo(42), "the main resource ignored the status change")

	// A status update cannot change spec.
	fresh := &dbv1.DatabaseCluster{}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), fresh); err != nil {
			return err
		}
		fresh.Spec.Image = "gauntlet.dev/etcd:v9.9.9"
		fresh.Status.LastSnapshot = &dbv1.SnapshotStatus{Location: "test", TakenAt: metav1.Now()}
		return env.Client.Status().Update(ctx, fresh)
	})).To(Succeed())
	stored := &dbv1.DatabaseCluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), stored)).To(Succeed())
	g.Expect(stored.Spec.Image).To(Equal("gauntlet.dev/etcd:v3.6.15"), "the status subresource ignored the spec change")
	g.Expect(stored.Status.LastSnapshot).NotTo(BeNil())
}

func TestDelete(t *testing.T) {
	cases := []struct {
		name   string
		policy dbv1.DeletionPolicy
	}{
		{"snapshot", dbv1.DeletionPolicySnapshot},
		{"delete", dbv1.DeletionPolicyDelete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			ns := newNamespace(t, "delete-")
			c := reference.NewCluster(ns, "db-"+tc.name).WithoutUID().WithDeletionPolicy(tc.policy).Build()
			create(t, c)
			waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))
			before := snapshots.Calls()

			g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
			waitGone(t, c)
			if tc.policy == dbv1.DeletionPolicySnapshot {
				g.Expect(snapshots.Calls()).To(BeNumerically(">", before))
			}
		})
	}
}

func TestDeleteKeepsFinalizerWhileSnapshotFails(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "snapfail-")
	c := reference.NewCluster(ns, "db-snapfail").WithoutUID().Build()
	snapshots.FailFor(c.Name, errors.New("no member answered the snapshot request"))
	t.Cleanup(func() { snapshots.FailFor(c.Name, nil) })
	create(t, c)
	waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))

	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonSnapshotFailed).
		WithMessageContaining("no member answered"))
	g.Expect(c.Finalizers).To(ContainElement(dbv1.Finalizer))
	g.Expect(c.DeletionTimestamp).NotTo(BeNil())

	snapshots.FailFor(c.Name, nil)
	waitGone(t, c)
}

func waitGone(t *testing.T, c *dbv1.DatabaseCluster) {
	t.Helper()
	err := framework.PollFor(t.Context(), c.Name+" to be deleted", convergeTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, describe(c), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
