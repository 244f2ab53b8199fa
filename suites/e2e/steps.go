package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Member opens an etcd client to one member pod over a port-forward.
func (e *Env) Member(ctx context.Context, ns, pod string) (*clientv3.Client, func(), error) {
	pf, err := framework.ForwardPort(ctx, e.Config, ns, pod, 2379)
	if err != nil {
		return nil, nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", pf.Local)}, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		pf.Close()
		return nil, nil, err
	}
	return cli, func() { _ = cli.Close(); pf.Close() }, nil
}

// CreateCluster creates a DatabaseCluster and waits until it is Available
// with every member healthy in etcd's eyes.
func CreateCluster(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(in.Env.Client.Create(ctx, c)).To(Succeed())
	WaitHealthy(ctx, t, in, c, int(*c.Spec.Replicas))
}

// WaitHealthy waits until the cluster is Available, not Progressing, not
// Degraded, its status lists n healthy voting members and no learner.
func WaitHealthy(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, n int) {
	t.Helper()
	waitHealthyEvery(ctx, t, in, c, n, pollInterval)
}

// waitHealthyEvery is WaitHealthy reading the cluster every interval.
func waitHealthyEvery(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, n int, interval time.Duration) {
	t.Helper()
	err := framework.PollFor(ctx, fmt.Sprintf("%s to have %d healthy members", c.Name, n), availableTimeout, interval, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return false, err.Error(), nil
		}
		ok, seen := Healthy(c, n)
		return ok, seen, nil
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// Healthy tells whether the cluster's status shows it settled: the current
// generation observed, Available, neither Progressing nor Degraded, and n
// healthy voting members with IDs (no learner). It also describes what it
// saw, for a wait's timeout message.
func Healthy(c *dbv1.DatabaseCluster, n int) (bool, string) {
	seen := framework.DescribeConditions(c.Status.Conditions) + fmt.Sprintf("\nmembers %+v", c.Status.Members)
	if c.Status.ObservedGeneration != c.Generation ||
		!meta.IsStatusConditionTrue(c.Status.Conditions, dbv1.ConditionAvailable) ||
		!meta.IsStatusConditionFalse(c.Status.Conditions, dbv1.ConditionProgressing) ||
		!meta.IsStatusConditionFalse(c.Status.Conditions, dbv1.ConditionDegraded) || len(c.Status.Members) != n {
		return false, seen
	}
	for _, m := range c.Status.Members {
		if !m.Healthy || m.Learner || m.ID == "" {
			return false, seen
		}
	}
	return true, seen
}

// WriteKeys writes n keys under prefix through the first member.
func WriteKeys(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, prefix string, n int) {
	t.Helper()
	g := NewWithT(t)
	cli, done, err := in.Env.Member(ctx, in.Namespace, operator.MemberName(c, 0))
	g.Expect(err).NotTo(HaveOccurred())
	defer done()
	for i := range n {
		_, err := cli.Put(ctx, fmt.Sprintf("%s/%04d", prefix, i), fmt.Sprintf("value-%d", i))
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// ExpectKeys reads the keys under prefix from every member (serializable
// reads: each member answers from its own data) and expects n of them.
func ExpectKeys(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, prefix string, n int) {
	t.Helper()
	for i := range int(*c.Spec.Replicas) {
		pod := operator.MemberName(c, i)
		err := framework.PollFor(ctx, fmt.Sprintf("%d keys under %s on %s", n, prefix, pod), time.Minute, pollInterval, func(ctx context.Context) (bool, string, error) {
			cli, done, err := in.Env.Member(ctx, in.Namespace, pod)
			if err != nil {
				return false, err.Error(), nil
			}
			defer done()
			resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
			if err != nil {
				return false, err.Error(), nil
			}
			return resp.Count == int64(n), fmt.Sprintf("%d keys", resp.Count), nil
		})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
}

// MemberIDs reads the member IDs by name from the cluster's status.
func MemberIDs(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster) map[string]string {
	t.Helper()
	NewWithT(t).Expect(in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
	out := map[string]string{}
	for _, m := range c.Status.Members {
		out[m.Name] = m.ID
	}
	return out
}

// Update changes the cluster's spec, retrying on conflicts, and returns the
// API server's error (the webhook's refusal, for example).
func Update(ctx context.Context, in SpecInput, c *dbv1.DatabaseCluster, mutate func(*dbv1.DatabaseCluster)) error {
	for {
		if err := in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		mutate(c)
		err := in.Env.Client.Update(ctx, c)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// SchedulableNodes names, sorted, the nodes a member may be scheduled on:
// not cordoned, no NoSchedule taint (a control plane).
func SchedulableNodes(ctx context.Context, t *testing.T, in SpecInput) []string {
	t.Helper()
	nodes := &corev1.NodeList{}
	NewWithT(t).Expect(in.Env.Client.List(ctx, nodes)).To(Succeed())
	var names []string
	for _, n := range nodes.Items {
		if !n.Spec.Unschedulable && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoSchedule }) {
			names = append(names, n.Name)
		}
	}
	slices.Sort(names)
	return names
}

// ExpectMembersSpread checks that the members run on as many nodes as
// there are members or schedulable nodes, whichever is fewer: one per
// worker on the multi-node cluster (so that losing a node costs one
// member), all on the one node of the single-node cluster.
func ExpectMembersSpread(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster) {
	t.Helper()
	g := NewWithT(t)
	schedulable := len(SchedulableNodes(ctx, t, in))
	pods := &corev1.PodList{}
	g.Expect(in.Env.Client.List(ctx, pods, client.InNamespace(in.Namespace), client.MatchingLabels(operator.SelectorLabels(c)))).To(Succeed())
	on := map[string][]string{}
	for _, p := range pods.Items {
		on[p.Spec.NodeName] = append(on[p.Spec.NodeName], p.Name)
	}
	want := min(len(pods.Items), schedulable)
	g.Expect(on).To(HaveLen(want), "%d members on %d schedulable nodes should take %d nodes; they are on %v", len(pods.Items), schedulable, want, on)
	t.Logf("%d members on %d of %d schedulable nodes: %v", len(pods.Items), len(on), schedulable, on)
}

// ExpectOperatorHealthy is the guard after every spec: the operator pod
// never restarted and recorded no reconcile panic.
func ExpectOperatorHealthy(ctx context.Context, t *testing.T, e *Env) {
	t.Helper()
	g := NewWithT(t)
	p, err := e.OperatorPod(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range p.Status.ContainerStatuses {
		g.Expect(s.RestartCount).To(BeZero(), "operator container %s restarted", s.Name)
	}
	fams, err := e.ScrapeOperator(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(framework.SumSamples(fams, "controller_runtime_reconcile_panics_total", nil)).To(BeZero())
	g.Expect(framework.SumSamples(fams, "controller_runtime_reconcile_total", map[string]string{"controller": operator.ControllerName})).To(BeNumerically(">", 0))
}

// ExpectStable checks that, once converged, the cluster's owned objects
// keep their resourceVersions: the operator writes nothing in steady state.
func ExpectStable(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster) {
	t.Helper()
	g := NewWithT(t)
	read := func() map[string]string {
		out := map[string]string{}
		for _, list := range []client.ObjectList{&corev1.ServiceList{}, &corev1.ConfigMapList{}} {
			g.Expect(in.Env.Client.List(ctx, list, client.InNamespace(in.Namespace))).To(Succeed())
			items, _ := meta.ExtractList(list)
			for _, it := range items {
				o := it.(client.Object)
				if metav1.IsControlledBy(o, c) {
					out[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetResourceVersion()
				}
			}
		}
		return out
	}
	// Stability is a property over time: checked every second for 15s,
	// failing at the first change.
	first := read()
	g.Consistently(read).WithTimeout(15*time.Second).WithPolling(time.Second).
		Should(Equal(first), "owned objects changed while the cluster was converged")
}
