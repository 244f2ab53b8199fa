package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

const crdName = "databaseclusters.database.gauntlet.dev"

// TestStorageVersionMigration: objects written while v1alpha1 was the
// storage version are stored as v1alpha1 in etcd (read raw from envtest's
// etcd); the migrator rewrites each in v1beta1 and trims the CRD's
// storedVersions to [v1beta1], after which etcd holds no v1alpha1 object.
// It briefly makes v1alpha1 the storage version of the suite's CRD, as an
// operator release without v1beta1 had it.
func TestStorageVersionMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "migrate-")

	setStorage := func(ctx context.Context, version string) {
		t.Helper()
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
				return err
			}
			for i := range crd.Spec.Versions {
				crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
			}
			return env.Client.Update(ctx, crd)
		})).To(Succeed())
	}
	setStorage(ctx, "v1alpha1")
	t.Cleanup(func() { setStorage(context.WithoutCancel(ctx), "v1beta1") })

	// The API server serves the new storage version once its CRD handler
	// has caught up: write until an object lands as v1alpha1.
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{env.Env.ControlPlane.Etcd.URL.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = raw.Close() }()
	storedAs := func(name string) string {
		resp, err := raw.Get(ctx, fmt.Sprintf("/registry/database.gauntlet.dev/databaseclusters/%s/%s", ns, name))
		g.Expect(err).NotTo(HaveOccurred())
		if len(resp.Kvs) == 0 {
			return ""
		}
		var tm metav1.TypeMeta
		g.Expect(json.Unmarshal(resp.Kvs[0].Value, &tm)).To(Succeed())
		return tm.APIVersion
	}
	names := []string{"old-0", "old-1", "old-2"}
	g.Eventually(func(g Gomega) {
		for _, name := range names {
			c := &dbv1alpha1.DatabaseCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: name + "-"},
				Spec: dbv1alpha1.DatabaseClusterSpec{Replicas: ptr.To[int32](1), Image: "gauntlet.dev/etcd:v3.6.16",
					Storage: dbv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}},
			}
			g.Expect(env.Client.Create(ctx, c)).To(Succeed())
			g.Expect(storedAs(c.Name)).To(Equal("database.gauntlet.dev/v1alpha1"))
		}
	}).WithTimeout(convergeTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())

	setStorage(ctx, "v1beta1")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.Status.StoredVersions).To(ConsistOf("v1alpha1", "v1beta1"))

	m := &operator.StorageVersionMigrator{Client: env.Client, CRD: crdName}
	r, err := m.Migrate(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Storage).To(Equal("v1beta1"))
	g.Expect(r.Rewritten).To(BeNumerically(">=", len(names)))
	t.Logf("migrated: storedVersions %v → [%s], %d objects rewritten", r.Before, r.Storage, r.Rewritten)

	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta1"}))
	list := &dbv1.DatabaseClusterList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).NotTo(BeEmpty())
	for _, c := range list.Items {
		g.Expect(storedAs(c.Name)).To(Equal("database.gauntlet.dev/v1beta1"), "%s after the migration", c.Name)
	}

	// Nothing left to do: a second run rewrites nothing.
	r, err = m.Migrate(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Rewritten).To(BeZero())
}
