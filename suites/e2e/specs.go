package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
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
