package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

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
	c := createV1alpha1Cluster(ctx, t, in)
	WriteKeys(ctx, t, in, c, "upgrade", 50)

	pods := func() map[string]string { return memberPodStates(ctx, g, in, c) }
	before := pods()
	g.Expect(before).To(HaveLen(3))
	stsBefore := &appsv1.StatefulSet{}
	g.Expect(in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: operator.StatefulSetName(c)}, stsBefore)).To(Succeed())
	genBefore := stsBefore.Generation

	start := time.Now()
	g.Expect(in.Env.Upgrade(ctx, image, manifests)).To(Succeed())
	t.Logf("operator upgraded to %s in %s", image, time.Since(start).Round(time.Second))
	waitStorageMigrated(ctx, t, in, start)

	// The new operator applies its StatefulSet: when its pod template is
	// the release's, nothing may restart; when it differs (a probe or a
	// spread rule changed), the operator rolls the members to it one at a
	// time, and the roll is watched: never more than one member unready,
	// Available never False, each member replaced once.
	if sts, changed := waitTemplateChanged(ctx, in, c, genBefore); !changed {
		WaitHealthy(ctx, t, in, c, 3)
		g.Expect(c.APIVersion).To(Or(BeEmpty(), Equal(dbv1.GroupVersion.String())))
		// Give the new operator time to act on the cluster: nothing may
		// restart meanwhile.
		g.Consistently(pods).WithTimeout(30*time.Second).WithPolling(2*time.Second).
			Should(Equal(before), "the pod template did not change: no member pod may restart or be replaced by the operator upgrade")
	} else {
		t.Logf("the pod template changed (revision %s → %s): watching the members roll", sts.Status.CurrentRevision, sts.Status.UpdateRevision)
		watchMembersRoll(ctx, t, in, c, sts)
		t.Logf("the members rolled to the new template %s after the upgrade began", time.Since(start).Round(time.Second))
		rolled := pods()
		g.Consistently(pods).WithTimeout(30*time.Second).WithPolling(2*time.Second).
			Should(Equal(rolled), "once rolled, no member pod may restart or be replaced")
	}
	WaitHealthy(ctx, t, in, c, 3)
	ExpectKeys(ctx, t, in, c, "upgrade", 50)
	old := &dbv1alpha1.DatabaseCluster{}
	g.Expect(in.Env.Client.Get(ctx, client.ObjectKeyFromObject(c), old)).To(Succeed(), "v1alpha1 is still served")
	g.Expect(old.Spec.Replicas).To(Equal(ptr.To[int32](3)))
}

// createV1alpha1Cluster creates a three-member cluster through the old
// release's v1alpha1 API, waits until it is Available with three healthy
// voting members, and returns a v1beta1 handle on it (name and replicas).
func createV1alpha1Cluster(ctx context.Context, t *testing.T, in SpecInput) *dbv1.DatabaseCluster {
	t.Helper()
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
	return &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: old.Name}, Spec: dbv1.DatabaseClusterSpec{Replicas: ptr.To[int32](3)}}
}

// memberPodStates describes each member pod by name as its UID and its
// containers' restart count: equal descriptions mean no pod was replaced
// or restarted.
func memberPodStates(ctx context.Context, g Gomega, in SpecInput, c *dbv1.DatabaseCluster) map[string]string {
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

// waitStorageMigrated waits until the CRD's stored objects are all
// v1beta1: the migrator runs once the new manager leads.
func waitStorageMigrated(ctx context.Context, t *testing.T, in SpecInput, start time.Time) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := framework.PollFor(ctx, "the CRD's stored objects to be migrated to v1beta1", availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKey{Name: "databaseclusters.database.gauntlet.dev"}, crd); err != nil {
			return false, err.Error(), nil
		}
		return slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}), fmt.Sprintf("storedVersions %v", crd.Status.StoredVersions), nil
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Logf("storedVersions [v1beta1] %s after the upgrade began", time.Since(start).Round(time.Second))
}

// waitTemplateChanged reports whether the new operator applied a changed
// StatefulSet, and returns it as last read. A changed template shows as a
// new StatefulSet generation within a few reconciles of the new operator
// taking the lead; 30 s without one is a template that did not change (and
// the pods are then watched 30 s more).
func waitTemplateChanged(ctx context.Context, in SpecInput, c *dbv1.DatabaseCluster, genBefore int64) (*appsv1.StatefulSet, bool) {
	sts := &appsv1.StatefulSet{}
	changed := framework.PollFor(ctx, "the new operator to apply a changed StatefulSet", 30*time.Second, pollInterval, func(ctx context.Context) (bool, string, error) {
		if err := in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: operator.StatefulSetName(c)}, sts); err != nil {
			return false, err.Error(), nil
		}
		return sts.Generation != genBefore && sts.Status.ObservedGeneration == sts.Generation && sts.Status.UpdateRevision != "",
			fmt.Sprintf("generation %d (before the upgrade %d), observed %d", sts.Generation, genBefore, sts.Status.ObservedGeneration), nil
	}) == nil
	return sts, changed
}

// watchMembersRoll waits until the three members run sts's update revision,
// failing at once if more than one member is unready, the cluster turns
// Available=False, or a member is replaced twice.
func watchMembersRoll(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, sts *appsv1.StatefulSet) {
	t.Helper()
	replaced := map[string]string{} // name → the new pod's UID
	err := framework.PollFor(ctx, "the members to roll to the new template, one at a time", 2*availableTimeout, pollInterval, func(ctx context.Context) (bool, string, error) {
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
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}
