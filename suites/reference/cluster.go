// Package reference adapts the reference DatabaseCluster operator to the
// Gauntlet harness: object builders for DatabaseClusters and a World that
// wires the reconciler to the fake client, the StatefulSet simulator, a
// scripted etcd and a scripted snapshotter. It is what another operator's
// team would write for their own operator; the harness itself lives in
// framework and knows nothing of this one.
package reference

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// DefaultImage is the etcd image the builders use unless told otherwise.
const DefaultImage = "gauntlet.dev/etcd:v3.6.16"

// ClusterBuilder builds DatabaseClusters for tests.
type ClusterBuilder struct{ c *dbv1.DatabaseCluster }

// NewCluster starts a 3-member cluster with 1Gi volumes, the default image
// and the Snapshot deletion policy. The UID is derived from the name, as the
// fake client does not assign one.
func NewCluster(namespace, name string) *ClusterBuilder {
	return &ClusterBuilder{c: &dbv1.DatabaseCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: dbv1.GroupVersion.String(), Kind: "DatabaseCluster"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name), Generation: 1,
		},
		Spec: dbv1.DatabaseClusterSpec{
			Replicas:       ptr.To[int32](3),
			Image:          DefaultImage,
			Storage:        dbv1.StorageSpec{Size: resource.MustParse("1Gi")},
			DeletionPolicy: dbv1.DeletionPolicySnapshot,
		},
	}}
}

// WithReplicas sets spec.replicas.
func (b *ClusterBuilder) WithReplicas(n int32) *ClusterBuilder {
	b.c.Spec.Replicas = ptr.To(n)
	return b
}

// WithImage sets spec.image.
func (b *ClusterBuilder) WithImage(image string) *ClusterBuilder {
	b.c.Spec.Image = image
	return b
}

// WithDeletionPolicy sets spec.deletionPolicy.
func (b *ClusterBuilder) WithDeletionPolicy(p dbv1.DeletionPolicy) *ClusterBuilder {
	b.c.Spec.DeletionPolicy = p
	return b
}

// WithStorage sets spec.storage.
func (b *ClusterBuilder) WithStorage(size string, class *string) *ClusterBuilder {
	b.c.Spec.Storage = dbv1.StorageSpec{Size: resource.MustParse(size), StorageClassName: class}
	return b
}

// WithoutUID clears the UID, for backends that assign one (a real API server).
func (b *ClusterBuilder) WithoutUID() *ClusterBuilder {
	b.c.UID = ""
	b.c.Generation = 0
	return b
}

// Build returns a copy of the object built so far.
func (b *ClusterBuilder) Build() *dbv1.DatabaseCluster { return b.c.DeepCopy() }
