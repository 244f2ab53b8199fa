package webhook

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func withReplicas(n int32) *dbv1.DatabaseCluster {
	return &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: dbv1.DatabaseClusterSpec{
		Replicas: ptr.To(n), Image: "gauntlet.dev/etcd:v3.6.16", Storage: dbv1.StorageSpec{Size: resource.MustParse("1Gi")},
	}}
}

func TestValidateUpdateScaleDown(t *testing.T) {
	cases := []struct {
		from, to int32
		allowed  bool
	}{
		{5, 3, true}, {5, 2, false}, {5, 4, true}, {3, 2, true}, {3, 1, false},
		{9, 5, true}, {9, 4, false}, {2, 1, false}, {1, 1, true}, {3, 9, true}, {4, 3, true}, {4, 2, false},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		_, err := Validator{}.ValidateUpdate(t.Context(), withReplicas(tc.from), withReplicas(tc.to))
		if tc.allowed {
			g.Expect(err).NotTo(HaveOccurred(), "%d -> %d", tc.from, tc.to)
			continue
		}
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%d -> %d: %v", tc.from, tc.to, err)
		g.Expect(err.Error()).To(And(
			ContainSubstring("spec.replicas"), ContainSubstring(RuleQuorumSafeScaleDown),
			ContainSubstring("from %d to %d", tc.from, tc.to)), "%d -> %d", tc.from, tc.to)
	}
}

func TestDeletingObjectIsNotChecked(t *testing.T) {
	g := NewWithT(t)
	newC := withReplicas(1)
	newC.DeletionTimestamp = ptr.To(metav1.Now())
	_, err := Validator{}.ValidateUpdate(t.Context(), withReplicas(5), newC)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestEvenSizesWarn(t *testing.T) {
	for n := int32(1); n <= 9; n++ {
		g := NewWithT(t)
		warnings, err := Validator{}.ValidateCreate(t.Context(), withReplicas(n))
		g.Expect(err).NotTo(HaveOccurred())
		if n%2 == 0 {
			g.Expect(warnings).To(ConsistOf(ContainSubstring("an even size adds a member without adding fault tolerance")), "n=%d", n)
		} else {
			g.Expect(warnings).To(BeEmpty(), "n=%d", n)
		}
	}
}

// TestV1beta1RulesHoldForWhatV1alpha1Carries: what a v1alpha1 write carries
// in its annotation reaches the webhook converted, and the CRD's v1beta1
// rules refuse it there, transition rules included.
func TestV1beta1RulesHoldForWhatV1alpha1Carries(t *testing.T) {
	g := NewWithT(t)
	c := withReplicas(3)
	c.Spec.Backup = &dbv1.BackupSpec{Schedule: "0 3 * * *", Retention: dbv1.BackupRetention{Count: ptr.To[int32](0)}}
	_, err := Validator{}.ValidateCreate(t.Context(), c)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.backup.retention.count"))

	restored := withReplicas(3)
	restored.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: "snap", File: "db.snapshot"}}
	_, err = Validator{}.ValidateUpdate(t.Context(), withReplicas(3), restored)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.restoreFrom: Forbidden: restoreFrom cannot be added after the cluster is created"))
}
