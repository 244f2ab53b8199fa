package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

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

// TestSteadyStateResyncWritesNothing: once converged, resync passes (run
// here directly, as a periodic resync would) change no resourceVersion of
// the DatabaseCluster or any child on the real API server.
func TestSteadyStateResyncWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "steady-")
	c := reference.NewCluster(ns, "db").WithoutUID().Build()
	create(t, c)
	waitForCluster(t, c, "converged", func(c *dbv1.DatabaseCluster) bool {
		ok, _ := framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled).Match(c)
		return ok && c.Status.ReadyReplicas == 3 && c.Status.ObservedGeneration == c.Generation
	})

	objects := []client.Object{
		&dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.StatefulSetName(c)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.HeadlessServiceName(c)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.ClientServiceName(c)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operator.PDBName(c)}},
	}
	versions := func() map[string]string {
		out := map[string]string{}
		for _, o := range objects {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			out[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetResourceVersion()
		}
		return out
	}
	// Let the informer caches catch up with the last writes, so the resync
	// passes read what the API server holds.
	before := versions()
	err := framework.PollFor(ctx, "the cache to hold the latest DatabaseCluster", convergeTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		cached := &dbv1.DatabaseCluster{}
		if err := reconciler.Client.Get(ctx, client.ObjectKeyFromObject(c), cached); err != nil {
			return false, err.Error(), nil
		}
		return cached.ResourceVersion == before["*v1beta1.DatabaseCluster/db"], cached.ResourceVersion, nil
	})
	g.Expect(err).NotTo(HaveOccurred())

	for range 5 {
		_, err := reconciler.Reconcile(ctx, reference.Request(c))
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Give any write a chance to land before comparing.
	g.Consistently(versions).WithTimeout(time.Second).WithPolling(200 * time.Millisecond).Should(Equal(before))
}

// TestFiftyClustersAtOnce: 50 DatabaseClusters created together, reconciled
// four at a time, all reach their expected status.
func TestFiftyClustersAtOnce(t *testing.T) {
	const n = 50
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "fifty-")
	start := time.Now()
	for i := range n {
		g.Expect(env.Client.Create(ctx, reference.NewCluster(ns, fmt.Sprintf("db-%02d", i)).WithoutUID().Build())).To(Succeed())
	}
	err := framework.PollFor(ctx, fmt.Sprintf("%d clusters Available with 3 ready members", n), 2*time.Minute, 250*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			list := &dbv1.DatabaseClusterList{}
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			var waiting []string
			for i := range list.Items {
				c := &list.Items[i]
				ok, _ := framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy).WithObservedGeneration(c.Generation).Match(c)
				if !ok || c.Status.ReadyReplicas != 3 || c.Status.ObservedGeneration != c.Generation {
					waiting = append(waiting, c.Name)
				}
			}
			return len(list.Items) == n && len(waiting) == 0, fmt.Sprintf("%d clusters, not ready yet: %v", len(list.Items), waiting), nil
		})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%d clusters converged in %s", n, time.Since(start).Round(time.Millisecond))
}
