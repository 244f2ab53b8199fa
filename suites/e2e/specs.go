package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// Timeouts of the specs: real pods pull nothing (images are preloaded) but
// start, elect and replicate for real.
const (
	availableTimeout = 4 * time.Minute
	pollInterval     = 2 * time.Second
)

// SpecInput is what every spec needs: the environment and a namespace of
// its own (created by NewNamespace).
type SpecInput struct {
	Env       *Env
	Namespace string
}

// NewNamespace creates a namespace for one spec, labelled for the
// restricted Pod Security Standard like the operator's, and deletes it
// (and waits) when the test ends; a failed test leaves a bundle first.
func (e *Env) NewNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := framework.NewNamespace(t, e.Client, prefix)
	nsObj := &corev1.Namespace{}
	NewWithT(t).Expect(e.Client.Get(t.Context(), client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	nsObj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}
	NewWithT(t).Expect(e.Client.Update(t.Context(), nsObj)).To(Succeed())
	t.Cleanup(func() {
		framework.DeleteAllAndWait(t, e.Client, ns, &dbv1.DatabaseCluster{}, &dbv1.DatabaseClusterList{})
	})
	framework.BundleOnFailure(t, "e2e", func() framework.BundleOptions {
		return framework.BundleOptions{
			Config: e.Config, Namespaces: []string{ns, OperatorNamespace}, Logs: e.Cluster.BundleLogs(),
			Files: map[string]func(context.Context) (string, error){
				"metrics.txt":      e.metricsText,
				"etcd-members.txt": func(ctx context.Context) (string, error) { return e.describeMembers(ctx, ns) },
			},
		}
	})
	return ns
}

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

func (e *Env) describeMembers(ctx context.Context, ns string) (string, error) {
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "etcd"}); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range pods.Items {
		cli, done, err := e.Member(ctx, ns, p.Name)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p.Name, err)
			continue
		}
		list, lerr := cli.MemberList(ctx)
		st, serr := cli.Status(ctx, cli.Endpoints()[0])
		done()
		fmt.Fprintf(&b, "== %s\nmember list: %v %v\nendpoint status: %+v %v\n", p.Name, list, lerr, st, serr)
	}
	return b.String(), nil
}

func (e *Env) metricsText(ctx context.Context) (string, error) {
	fams, err := e.ScrapeOperator(ctx)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %v\n", n, fams[n].GetMetric())
	}
	return b.String(), nil
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

// CreateSpec: three members become Available; keys written through one
// member are read back from every member.
func CreateSpec(ctx context.Context, t *testing.T, in SpecInput) *dbv1.DatabaseCluster {
	c := reference.NewCluster(in.Namespace, "db").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	CreateCluster(ctx, t, in, c)
	ExpectMembersSpread(ctx, t, in, c)
	WriteKeys(ctx, t, in, c, "create", 100)
	ExpectKeys(ctx, t, in, c, "create", 100)
	return c
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

// ScaleSpec: 3→5→3 with the data intact and no learner left; a scale-down
// that breaks quorum (3→1) is refused by the webhook.
func ScaleSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	c := CreateSpec(ctx, t, in)
	err := Update(ctx, in, c, func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](1) })
	g.Expect(err).To(MatchError(ContainSubstring("quorum")), "the webhook refuses 3→1")
	for _, n := range []int32{5, 3} {
		g.Expect(Update(ctx, in, c, func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To(n) })).To(Succeed())
		WaitHealthy(ctx, t, in, c, int(n))
		ExpectKeys(ctx, t, in, c, "create", 100)
	}
}

// UpgradeSpec: a cluster on the older etcd image is rolled to the newer one,
// one member at a time (never more than one member not ready), data intact.
func UpgradeSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	c := reference.NewCluster(in.Namespace, "db").WithImage(in.Env.EtcdUpgradeFrom).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	CreateCluster(ctx, t, in, c)
	WriteKeys(ctx, t, in, c, "upgrade", 50)
	g.Expect(Update(ctx, in, c, func(c *dbv1.DatabaseCluster) { c.Spec.Image = in.Env.EtcdImage })).To(Succeed())
	worst := 0
	err := framework.PollFor(ctx, "every member on "+in.Env.EtcdImage, availableTimeout, time.Second, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := in.Env.Client.List(ctx, pods, client.InNamespace(in.Namespace), client.MatchingLabels(operator.SelectorLabels(c))); err != nil {
			return false, err.Error(), nil
		}
		down, updated := 3-len(pods.Items), 0
		for _, p := range pods.Items {
			if !framework.PodReady(&p) {
				down++
			}
			if p.Spec.Containers[0].Image == in.Env.EtcdImage {
				updated++
			}
		}
		worst = max(worst, down)
		return updated == 3 && down == 0, fmt.Sprintf("%d updated, %d down", updated, down), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(worst).To(BeNumerically("<=", 1), "more than one member was down at once")
	WaitHealthy(ctx, t, in, c, 3)
	ExpectKeys(ctx, t, in, c, "upgrade", 50)
}

// MemberLossSpec: a deleted member pod comes back as the same member with
// its data; a member whose volume and pod are deleted comes back as a new
// member.
func MemberLossSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	c := CreateSpec(ctx, t, in)
	before := MemberIDs(ctx, t, in, c)
	old := &corev1.Pod{}
	g.Expect(in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: "db-1"}, old)).To(Succeed())
	g.Expect(in.Env.Client.Delete(ctx, old)).To(Succeed())
	// Health is only worth waiting for once the replacement pod runs:
	// before that, status still describes the old one.
	err := framework.PollFor(ctx, "db-1 to be recreated and ready", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		p := &corev1.Pod{}
		if err := in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: "db-1"}, p); err != nil {
			return false, err.Error(), nil
		}
		return p.UID != old.UID && framework.PodReady(p), fmt.Sprintf("pod %s, ready %v", p.UID, framework.PodReady(p)), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	WaitHealthy(ctx, t, in, c, 3)
	g.Expect(MemberIDs(ctx, t, in, c)).To(Equal(before), "db-1 rejoined as itself")
	ExpectKeys(ctx, t, in, c, "create", 100)

	g.Expect(in.Env.Client.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "data-db-2"}})).To(Succeed())
	g.Expect(in.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "db-2"}})).To(Succeed())
	err = framework.PollFor(ctx, "db-2 to rejoin as a new member", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		ids := MemberIDs(ctx, t, in, c)
		return ids["db-2"] != "" && ids["db-2"] != before["db-2"], fmt.Sprintf("members %v, conditions:\n%s", ids, framework.DescribeConditions(c.Status.Conditions)), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	WaitHealthy(ctx, t, in, c, 3)
	ExpectKeys(ctx, t, in, c, "create", 100)
}

// SnapshotSpec: deleting with Snapshot leaves a verified snapshot on a claim
// that outlives the cluster; a new cluster restored from it holds the data;
// deleting with Delete leaves no claim behind.
func SnapshotSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	c := reference.NewCluster(in.Namespace, "db").WithImage(in.Env.EtcdImage).Build()
	g.Expect(c.Spec.DeletionPolicy).To(BeEquivalentTo(dbv1.DeletionPolicySnapshot))
	CreateCluster(ctx, t, in, c)
	WriteKeys(ctx, t, in, c, "snap", 30)
	// Watch, not poll: the snapshot is recorded one pass before the
	// finalizer goes, a second apart.
	wc, err := client.NewWithWatch(in.Env.Config, client.Options{Scheme: in.Env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	list := &dbv1.DatabaseClusterList{}
	g.Expect(wc.List(ctx, list, client.InNamespace(in.Namespace))).To(Succeed())
	w, err := wc.Watch(ctx, &dbv1.DatabaseClusterList{}, client.InNamespace(in.Namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	g.Expect(in.Env.Client.Delete(ctx, c)).To(Succeed())
	var last *dbv1.SnapshotStatus
	deadline := time.After(availableTimeout)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			g.Expect(ok).To(BeTrue(), "the watch ended before the cluster was deleted")
			got, isCluster := ev.Object.(*dbv1.DatabaseCluster)
			if !isCluster || got.Name != c.Name {
				continue
			}
			if got.Status.LastSnapshot != nil {
				last = got.Status.LastSnapshot.DeepCopy()
			}
			deleted = ev.Type == watch.Deleted
		case <-deadline:
			got := &dbv1.DatabaseCluster{}
			_ = in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)
			t.Fatalf("the cluster was not deleted within %s; last seen:\n%s", availableTimeout, framework.DescribeConditions(got.Status.Conditions))
		}
	}
	g.Expect(last).NotTo(BeNil(), "lastSnapshot was recorded before the finalizer went")
	g.Expect(last.Final).To(BeTrue())
	g.Expect(last.Revision).To(BeNumerically(">", 30))
	g.Expect(last.TotalKeys).To(BeNumerically(">=", 30))
	claim, file, ok := strings.Cut(strings.TrimPrefix(last.Location, "pvc/"), "/")
	g.Expect(ok).To(BeTrue(), "location %s", last.Location)
	g.Expect(in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: claim}, &corev1.PersistentVolumeClaim{})).To(Succeed(), "the snapshot claim outlives the cluster")

	restored := reference.NewCluster(in.Namespace, "restored").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	restored.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: claim, File: file}}
	CreateCluster(ctx, t, in, restored)
	ExpectKeys(ctx, t, in, restored, "snap", 30)

	g.Expect(in.Env.Client.Delete(ctx, restored)).To(Succeed())
	err = framework.PollFor(ctx, "nothing of the Delete cluster left", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := in.Env.Client.List(ctx, claims, client.InNamespace(in.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": "restored"}); err != nil {
			return false, err.Error(), nil
		}
		pods := &corev1.PodList{}
		if err := in.Env.Client.List(ctx, pods, client.InNamespace(in.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": "restored"}); err != nil {
			return false, err.Error(), nil
		}
		return len(claims.Items) == 0 && len(pods.Items) == 0, fmt.Sprintf("%d claims, %d pods", len(claims.Items), len(pods.Items)), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
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

// BackupSpec: a schedule of every minute produces verified backups on the
// cluster's snapshot claim, recorded in status.lastBackup; retention trims
// them to its count; a new cluster restored from the newest backup serves
// every key; removing spec.backup removes the CronJob.
func BackupSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	c := reference.NewCluster(in.Namespace, "db").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	c.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    "* * * * *",
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](2)},
		Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}},
	}
	CreateCluster(ctx, t, in, c)
	WriteKeys(ctx, t, in, c, "backup", 40)

	// Three successful runs, a minute apart: the third one's retention
	// (count 2) has deleted at least one older backup.
	WaitVerifiedBackups(ctx, t, in, c, 3, 0)
	last := c.Status.LastBackup.Snapshot
	g.Expect(last.TotalKeys).To(BeNumerically(">=", 40))

	// Retention (count 2): after three runs the claim holds two backups.
	g.Expect(c.Status.LastBackup.Retained).To(Equal(int32(2)), "backups left after the last run's retention")
	jobs := &batchv1.JobList{}
	g.Expect(in.Env.Client.List(ctx, jobs, client.InNamespace(in.Namespace), client.MatchingLabels(operator.BackupJobLabels(c)))).To(Succeed())
	g.Expect(len(jobs.Items)).To(BeNumerically("<=", 3+3), "the CronJob keeps at most three Jobs of each outcome")

	claim, file, ok := strings.Cut(strings.TrimPrefix(last.Location, "pvc/"), "/")
	g.Expect(ok).To(BeTrue(), "location %s", last.Location)
	g.Expect(claim).To(Equal(operator.SnapshotClaimName(c)))

	restored := reference.NewCluster(in.Namespace, "restored").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	restored.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: claim, File: file}}
	CreateCluster(ctx, t, in, restored)
	ExpectKeys(ctx, t, in, restored, "backup", 40)

	g.Expect(Update(ctx, in, c, func(c *dbv1.DatabaseCluster) { c.Spec.Backup = nil })).To(Succeed())
	err := framework.PollFor(ctx, "the backup CronJob to go", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		err := in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: operator.BackupCronJobName(c)}, &batchv1.CronJob{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
}

// OperatorUpgradeSpec: the environment runs a release of the operator that
// has no v1beta1 (Setup deployed it); a v1alpha1 cluster is created and
// written to; then the operator under test (image, manifests) is deployed
// over it. The old object is served as v1beta1, the CRD's stored objects
// are migrated (storedVersions is [v1beta1] only), no member pod restarted
// or was replaced unless the member pod template changed (then the members
// roll to it one at a time, Available throughout), and every key is still
// there.
func OperatorUpgradeSpec(ctx context.Context, t *testing.T, in SpecInput, image, manifests string) {
	g := NewWithT(t)
	old := &dbv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "db"},
		Spec: dbv1alpha1.DatabaseClusterSpec{Replicas: ptr.To[int32](3), Image: in.Env.EtcdImage,
			Storage: dbv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}, DeletionPolicy: dbv1alpha1.DeletionPolicyDelete},
	}
	g.Expect(in.Env.Client.Create(ctx, old)).To(Succeed())
	err := framework.PollFor(ctx, "the v1alpha1 cluster to be Available with 3 healthy members", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
			return false, err.Error(), nil
		}
		healthy := 0
		for _, m := range old.Status.Members {
			if m.Healthy && m.ID != "" && !m.Learner {
				healthy++
			}
		}
		ok := meta.IsStatusConditionTrue(old.Status.Conditions, "Available") && meta.IsStatusConditionFalse(old.Status.Conditions, "Progressing") && healthy == 3
		return ok, framework.DescribeConditions(old.Status.Conditions), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	c := &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: old.Name}, Spec: dbv1.DatabaseClusterSpec{Replicas: ptr.To[int32](3)}}
	WriteKeys(ctx, t, in, c, "upgrade", 50)

	pods := func() map[string]string {
		list := &corev1.PodList{}
		g.Expect(in.Env.Client.List(ctx, list, client.InNamespace(in.Namespace), client.MatchingLabels(operator.SelectorLabels(c)))).To(Succeed())
		out := map[string]string{}
		for _, p := range list.Items {
			restarts := int32(0)
			for _, s := range p.Status.ContainerStatuses {
				restarts += s.RestartCount
			}
			out[p.Name] = fmt.Sprintf("uid %s, %d restarts", p.UID, restarts)
		}
		return out
	}
	before := pods()
	g.Expect(before).To(HaveLen(3))
	stsBefore := &appsv1.StatefulSet{}
	g.Expect(in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: operator.StatefulSetName(c)}, stsBefore)).To(Succeed())
	genBefore := stsBefore.Generation

	start := time.Now()
	g.Expect(in.Env.Upgrade(ctx, image, manifests)).To(Succeed())
	t.Logf("operator upgraded to %s in %s", image, time.Since(start).Round(time.Second))

	// The migrator runs once the new manager leads: then every object is
	// stored as v1beta1.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err = framework.PollFor(ctx, "the CRD's stored objects to be migrated to v1beta1", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKey{Name: "databaseclusters.database.gauntlet.dev"}, crd); err != nil {
			return false, err.Error(), nil
		}
		return slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}), fmt.Sprintf("storedVersions %v", crd.Status.StoredVersions), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("storedVersions [v1beta1] %s after the upgrade began", time.Since(start).Round(time.Second))

	// The new operator applies its StatefulSet: when its pod template is
	// the release's, nothing may restart; when it differs (a probe or a
	// spread rule changed), the operator rolls the members to it one at a
	// time, and the roll is watched: never more than one member unready,
	// Available never False, each member replaced once.
	sts := &appsv1.StatefulSet{}
	// A changed template shows as a new StatefulSet generation within a few
	// reconciles of the new operator taking the lead; 30 s without one is a
	// template that did not change (and the pods are then watched 30 s more).
	changed := framework.PollFor(ctx, "the new operator to apply a changed StatefulSet", 30*time.Second, pollInterval, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: operator.StatefulSetName(c)}, sts); err != nil {
			return false, err.Error(), nil
		}
		return sts.Generation != genBefore && sts.Status.ObservedGeneration == sts.Generation && sts.Status.UpdateRevision != "",
			fmt.Sprintf("generation %d (before the upgrade %d), observed %d", sts.Generation, genBefore, sts.Status.ObservedGeneration), nil
	}) == nil
	if !changed {
		WaitHealthy(ctx, t, in, c, 3)
		g.Expect(c.APIVersion).To(Or(BeEmpty(), Equal(dbv1.GroupVersion.String())))
		// Give the new operator time to act on the cluster: nothing may
		// restart meanwhile.
		g.Consistently(pods).WithTimeout(30*time.Second).WithPolling(2*time.Second).
			Should(Equal(before), "the pod template did not change: no member pod may restart or be replaced by the operator upgrade")
	} else {
		t.Logf("the pod template changed (revision %s → %s): watching the members roll", sts.Status.CurrentRevision, sts.Status.UpdateRevision)
		replaced := map[string]string{} // name → the new pod's UID
		err = framework.PollFor(ctx, "the members to roll to the new template, one at a time", 2*availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
			list := &corev1.PodList{}
			if err := in.Env.Client.List(ctx, list, client.InNamespace(in.Namespace), client.MatchingLabels(operator.SelectorLabels(c))); err != nil {
				return false, err.Error(), nil
			}
			if err := in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
				return false, err.Error(), nil
			}
			if meta.IsStatusConditionFalse(c.Status.Conditions, dbv1.ConditionAvailable) {
				return false, "", fmt.Errorf("the cluster turned Available=False during the roll:\n%s", framework.DescribeConditions(c.Status.Conditions))
			}
			unready, updated := 3-len(list.Items), 0
			for _, p := range list.Items {
				if !framework.PodReady(&p) {
					unready++
				}
				if p.Labels[appsv1.ControllerRevisionHashLabelKey] != sts.Status.UpdateRevision {
					continue
				}
				updated++
				if uid, ok := replaced[p.Name]; ok && uid != string(p.UID) {
					return false, "", fmt.Errorf("%s was replaced twice", p.Name)
				}
				replaced[p.Name] = string(p.UID)
			}
			if unready > 1 {
				return false, "", fmt.Errorf("%d members not ready at once during the roll", unready)
			}
			ok, seen := Healthy(c, 3)
			return ok && updated == 3, fmt.Sprintf("%d of 3 members on the new template, %d unready; %s", updated, unready, seen), nil
		})
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("the members rolled to the new template %s after the upgrade began", time.Since(start).Round(time.Second))
		rolled := pods()
		g.Consistently(pods).WithTimeout(30*time.Second).WithPolling(2*time.Second).
			Should(Equal(rolled), "once rolled, no member pod may restart or be replaced")
	}
	WaitHealthy(ctx, t, in, c, 3)
	ExpectKeys(ctx, t, in, c, "upgrade", 50)
	old = &dbv1alpha1.DatabaseCluster{}
	g.Expect(in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), old)).To(Succeed(), "v1alpha1 is still served")
	g.Expect(old.Spec.Replicas).To(Equal(ptr.To[int32](3)))
}

// WaitVerifiedBackups waits until n scheduled backups of c, each a new Job,
// were recorded as verified, the last one holding at least minKeys keys; a
// failed one ends the wait. It logs each as it comes and leaves c as last read.
func WaitVerifiedBackups(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, n int, minKeys int64) {
	t.Helper()
	succeeded := map[string]bool{}
	start := time.Now()
	err := framework.PollFor(ctx, fmt.Sprintf("%d verified scheduled backups", n), 5*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return false, err.Error(), nil
		}
		lb := c.Status.LastBackup
		switch {
		case lb == nil:
			return false, "no backup recorded yet; conditions:\n" + framework.DescribeConditions(c.Status.Conditions), nil
		case !lb.Succeeded:
			return false, "", fmt.Errorf("backup %s failed: %s", lb.Job, lb.Message)
		case !succeeded[lb.Job]:
			succeeded[lb.Job] = true
			t.Logf("%s: backup %s verified at %s: revision %d, %d keys", time.Since(start).Round(time.Second), lb.Job, lb.Snapshot.Location, lb.Snapshot.Revision, lb.Snapshot.TotalKeys)
		}
		return len(succeeded) >= n && lb.Snapshot.TotalKeys >= minKeys, fmt.Sprintf("%d verified so far, last %s", len(succeeded), lb.Job), nil
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// BackupToBucketSpec: with an S3-compatible server in the namespace, a
// schedule of every minute stores verified backups in its bucket under the
// prefix, retention trims them there to two, and a new cluster restored
// from the newest object serves every key.
func BackupToBucketSpec(ctx context.Context, t *testing.T, in SpecInput) {
	g := NewWithT(t)
	s3 := StartS3Server(ctx, t, in, "backups")
	c := reference.NewCluster(in.Namespace, "db").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	bucket := dbv1.S3Bucket{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Prefix: "clusters/db/", Region: "us-east-1", CredentialsSecret: dbv1.SecretReference{Name: s3.Secret}}
	c.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    "* * * * *",
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](2)},
		Destination: dbv1.BackupDestination{S3: bucket.DeepCopy()},
	}
	CreateCluster(ctx, t, in, c)
	WriteKeys(ctx, t, in, c, "bucket", 40)

	WaitVerifiedBackups(ctx, t, in, c, 3, 40)
	last := c.Status.LastBackup
	g.Expect(last.Retained).To(Equal(int32(2)))
	key, ok := strings.CutPrefix(last.Snapshot.Location, "s3://backups/clusters/db/")
	g.Expect(ok).To(BeTrue(), "location %s", last.Snapshot.Location)
	keys := s3.Keys(ctx, t, in, "clusters/db/")
	g.Expect(keys).To(HaveLen(2), "retention keeps two backups in the bucket: %v", keys)
	g.Expect(keys).To(ContainElement("clusters/db/" + key))

	restored := reference.NewCluster(in.Namespace, "restored").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	restored.Spec.RestoreFrom = &dbv1.RestoreSource{S3: &dbv1.S3SnapshotSource{S3Bucket: bucket, Key: key}}
	CreateCluster(ctx, t, in, restored)
	ExpectKeys(ctx, t, in, restored, "bucket", 40)
	t.Logf("a cluster restored from %s serves all 40 keys", last.Snapshot.Location)
}
