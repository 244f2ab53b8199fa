package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/gauntlet-dev/gauntlet/framework"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// experimentPrefix marks namespaces where a test runs controllers of its own;
// the suite's manager stays out of them.
const experimentPrefix = "experiment-"

var notExperiment = predicate.NewPredicateFuncs(func(o client.Object) bool {
	return !strings.HasPrefix(o.GetNamespace(), experimentPrefix)
})

// Wait intervals, in one place.
const (
	convergeTimeout = 30 * time.Second
	pollInterval    = 50 * time.Millisecond
)

// newNamespace creates a namespace for one test; at the end every
// DatabaseCluster in it is deleted (through its finalizer) before the
// namespace, so no test leaves controller work behind.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := framework.NewNamespace(t, env.Client, prefix)
	t.Cleanup(func() {
		framework.DeleteAllAndWait(t, env.Client, ns, &dbv1.DatabaseCluster{}, &dbv1.DatabaseClusterList{})
	})
	// Registered after the deletion, so it runs first (cleanups run last
	// in, first out) and sees the namespace as the test left it.
	framework.BundleOnFailure(t, "integration", func() framework.BundleOptions {
		return framework.BundleOptions{Config: env.Config, Namespaces: []string{ns}}
	})
	return ns
}

// create creates c through the API server, webhook included.
func create(t *testing.T, c *dbv1.DatabaseCluster) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(t.Context(), c)).To(Succeed())
}

// waitForCluster polls c until match holds, printing its conditions on timeout.
func waitForCluster(t *testing.T, c *dbv1.DatabaseCluster, what string, match func(*dbv1.DatabaseCluster) bool) {
	t.Helper()
	err := framework.PollFor(t.Context(), what, convergeTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return false, err.Error(), nil
		}
		return match(c), describe(c), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitForCondition waits until c has the condition.
func waitForCondition(t *testing.T, c *dbv1.DatabaseCluster, m *framework.ConditionMatcher) {
	t.Helper()
	waitForCluster(t, c, "condition "+fmt.Sprint(m), func(c *dbv1.DatabaseCluster) bool {
		ok, _ := m.Match(c)
		return ok
	})
}

func describe(c *dbv1.DatabaseCluster) string {
	return fmt.Sprintf("generation=%d observedGeneration=%d replicas=%d ready=%d finalizers=%v\n%s",
		c.Generation, c.Status.ObservedGeneration, c.Status.Replicas, c.Status.ReadyReplicas, c.Finalizers,
		framework.DescribeConditions(c.Status.Conditions))
}
