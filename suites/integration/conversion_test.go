package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// TestConversionThroughTheAPIServer: an object created as v1alpha1 is stored
// as v1beta1 and read as either version through the manager's conversion
// webhook; it is updated through either version and nothing is lost, not
// even what only v1beta1 can say (status.lastBackup), which rides through
// v1alpha1 in an annotation.
func TestConversionThroughTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "conversion-")
	key := client.ObjectKey{Namespace: ns, Name: "old"}

	alpha := &dbv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"},
		Spec: dbv1alpha1.DatabaseClusterSpec{
			Replicas: ptr.To[int32](3), Image: "gauntlet.dev/etcd:v3.6.16",
			Storage:     dbv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			RestoreFrom: &dbv1alpha1.RestoreSource{ClaimName: "db-snapshots", File: "db.db"},
		},
	}
	g.Expect(env.Client.Create(ctx, alpha, client.FieldValidation("Strict"))).To(Succeed())

	// Read as v1beta1: restoreFrom moved under volume, the rest as written.
	beta := &dbv1.DatabaseCluster{}
	g.Expect(env.Client.Get(ctx, key, beta)).To(Succeed())
	g.Expect(beta.APIVersion).To(Or(BeEmpty(), Equal(dbv1.GroupVersion.String())))
	g.Expect(beta.Spec.RestoreFrom).To(Equal(&dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: "db-snapshots", File: "db.db"}}))
	g.Expect(*beta.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(beta.Spec.DeletionPolicy).To(Equal(dbv1.DeletionPolicySnapshot), "the v1alpha1 schema defaulted it")

	// Write a v1beta1-only field through v1beta1.
	finished := metav1.NewTime(metav1.Now().Rfc3339Copy().Time)
	lastBackup := &dbv1.BackupStatus{Job: "old-backup-29000000", Succeeded: false, FinishedAt: &finished, Message: "written through v1beta1"}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, key, beta); err != nil {
			return err
		}
		beta.Status.LastBackup = lastBackup
		return env.Client.Status().Update(ctx, beta)
	})).To(Succeed())

	// Read it back as v1alpha1: the field is in the annotation, and an update
	// through v1alpha1 (a new label) keeps it.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, key, alpha); err != nil {
			return err
		}
		if _, found := alpha.Annotations[dbv1alpha1.HubOnlyAnnotation]; !found {
			t.Fatalf("v1alpha1 read has no %s annotation: %v", dbv1alpha1.HubOnlyAnnotation, alpha.Annotations)
		}
		alpha.Labels = map[string]string{"updated-through": "v1alpha1"}
		return env.Client.Update(ctx, alpha, client.FieldValidation("Strict"))
	})).To(Succeed())

	g.Expect(env.Client.Get(ctx, key, beta)).To(Succeed())
	g.Expect(beta.Labels).To(HaveKeyWithValue("updated-through", "v1alpha1"))
	g.Expect(apiequality.Semantic.DeepEqual(beta.Status.LastBackup, lastBackup)).To(BeTrue(),
		"v1beta1's status.lastBackup must survive an update through v1alpha1: got %+v, want %+v", beta.Status.LastBackup, lastBackup)
	g.Expect(beta.Annotations).NotTo(HaveKey(dbv1alpha1.HubOnlyAnnotation), "the annotation is v1alpha1's, never stored")
	g.Expect(beta.Spec.RestoreFrom.Volume.ClaimName).To(Equal("db-snapshots"))

	// And an update through v1beta1 reads back through v1alpha1.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, key, beta); err != nil {
			return err
		}
		beta.Spec.Replicas = ptr.To[int32](5)
		return env.Client.Update(ctx, beta, client.FieldValidation("Strict"))
	})).To(Succeed())
	g.Expect(env.Client.Get(ctx, key, alpha)).To(Succeed())
	g.Expect(*alpha.Spec.Replicas).To(Equal(int32(5)))
	g.Expect(alpha.Spec.RestoreFrom).To(Equal(&dbv1alpha1.RestoreSource{ClaimName: "db-snapshots", File: "db.db"}))
}

// TestV1alpha1CannotBypassV1beta1Rules: v1beta1's fields written through
// v1alpha1 (in the annotation) are held to v1beta1's rules, by the real API
// server, conversion webhook and validating webhook; an unknown field in
// the annotation is refused by name; restoreFrom stays immutable through
// v1alpha1.
func TestV1alpha1CannotBypassV1beta1Rules(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t, "bypass-")
	alpha := func(name, hubOnly string) *dbv1alpha1.DatabaseCluster {
		c := &dbv1alpha1.DatabaseCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: dbv1alpha1.DatabaseClusterSpec{
				Replicas: ptr.To[int32](3), Image: "gauntlet.dev/etcd:v3.6.16",
				Storage: dbv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			},
		}
		if hubOnly != "" {
			c.Annotations = map[string]string{dbv1alpha1.HubOnlyAnnotation: hubOnly}
		}
		return c
	}
	refused := []struct {
		name, hubOnly string
		want          []string
	}{
		{"retention-zero", `{"backup":{"schedule":"@hourly","retention":{"count":0},"destination":{"volume":{}}}}`,
			[]string{"spec.backup.retention.count"}},
		{"destination-neither", `{"backup":{"schedule":"@hourly","retention":{"count":3},"destination":{}}}`,
			[]string{"spec.backup.destination"}},
		{"unknown-field", `{"backup":{"schedule":"@hourly","retension":{"count":3}}}`,
			[]string{dbv1alpha1.HubOnlyAnnotation, `unknown field "retension"`}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, alpha(tc.name, tc.hubOnly), client.FieldValidation("Strict"))
			g := NewWithT(t)
			g.Expect(err).To(HaveOccurred(), "stored through v1alpha1")
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	t.Run("restoreFrom added later", func(t *testing.T) {
		g := NewWithT(t)
		c := alpha("restore-later", "")
		g.Expect(env.Client.Create(ctx, c, client.FieldValidation("Strict"))).To(Succeed())
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
				return err
			}
			c.Annotations = map[string]string{dbv1alpha1.HubOnlyAnnotation: `{"restoreFromS3":{"bucket":"snaps","key":"db.snapshot","endpoint":"http://s3.example:9000","credentialsSecret":{"name":"s3"}}}`}
			return env.Client.Update(ctx, c, client.FieldValidation("Strict"))
		})
		g.Expect(err).To(MatchError(ContainSubstring("spec.restoreFrom: Forbidden: restoreFrom cannot be added after the cluster is created")))
	})
}
