package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeletionPolicy says what happens to the data when a DatabaseCluster is deleted.
// +kubebuilder:validation:Enum=Snapshot;Delete
type DeletionPolicy string

const (
	// DeletionPolicySnapshot takes and verifies a final snapshot that outlives
	// the cluster before anything is deleted. It is the default.
	DeletionPolicySnapshot DeletionPolicy = "Snapshot"
	// DeletionPolicyDelete deletes the cluster and its volumes without a snapshot.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// Finalizer guards a DatabaseCluster until its deletion policy has been carried out.
const Finalizer = "database.gauntlet.dev/final-snapshot"

// DatabaseClusterSpec is the desired state of an etcd cluster.
// +kubebuilder:validation:XValidation:rule="has(self.restoreFrom) == has(oldSelf.restoreFrom)",fieldPath=".restoreFrom",reason=FieldValueForbidden,message="restoreFrom cannot be added or removed after the cluster is created",messageExpression=`has(self.restoreFrom) ? 'restoreFrom cannot be added after the cluster is created: a cluster is restored only when it is created, so create a new cluster with restoreFrom set' : 'restoreFrom cannot be removed after the cluster is created: keep the restoreFrom it was created with'`
type DatabaseClusterSpec struct {
	// Replicas is the number of etcd members. Odd sizes tolerate the most
	// failures for their cost: 3 tolerates one, 5 tolerates two.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +required
	Replicas *int32 `json:"replicas"`

	// Image is the etcd container image. Changing it rolls members one at a time.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.matches('\\\\s')",message="image must not contain spaces or other whitespace"
	// +required
	Image string `json:"image"`

	// Resources of each etcd container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Storage of each member's data volume. It cannot change after creation,
	// because a StatefulSet's volume claim templates are immutable.
	// +required
	Storage StorageSpec `json:"storage"`

	// DeletionPolicy is Snapshot (the default: a verified final snapshot is
	// taken before anything is deleted) or Delete (no snapshot).
	// +kubebuilder:default=Snapshot
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// RestoreFrom bootstraps the new cluster from a snapshot instead of an
	// empty keyspace: every member's volume is restored from it before the
	// members first start. It is set at creation and cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="restoreFrom is immutable: a cluster is restored once, when it is created, so keep the restoreFrom it was created with"
	// +optional
	RestoreFrom *RestoreSource `json:"restoreFrom,omitempty"`
}

// RestoreSource names a snapshot file on a volume claim in the cluster's
// namespace, such as the final snapshot a deleted cluster left behind (its
// status.lastSnapshot.location reads pvc/<claimName>/<file>).
type RestoreSource struct {
	// ClaimName is the PersistentVolumeClaim that holds the snapshot.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="claimName must be a PersistentVolumeClaim name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +required
	ClaimName string `json:"claimName"`
	// File is the snapshot's file name on that claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9._-]*$')",message="file must be a plain file name: letters, digits, '.', '_' and '-', starting with a letter or digit, with no directory"
	// +required
	File string `json:"file"`
}

// StorageSpec describes each member's persistent volume. It cannot change
// after creation, because a StatefulSet's volume claim templates cannot.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName)",fieldPath=".storageClassName",reason=FieldValueForbidden,message="storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: storageClassName cannot be added or removed",messageExpression=`has(self.storageClassName) ? 'storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: storageClassName cannot be added; remove it' : 'storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: storageClassName cannot be removed; keep ' + oldSelf.storageClassName`
type StorageSpec struct {
	// StorageClassName of the volume claims; empty uses the cluster's default class.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="storageClassName must be a StorageClass name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: keep the storageClassName the cluster was created with",messageExpression=`'storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: keep storageClassName ' + oldSelf`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Size of each member's volume, for example 1Gi.
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="size must be greater than zero, for example 1Gi"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: keep the size the cluster was created with"
	// +required
	Size resource.Quantity `json:"size"`
}

// MemberStatus is one etcd member as last observed.
type MemberStatus struct {
	// Name is the member's name, which is its pod's name.
	Name string `json:"name"`
	// ID is etcd's member ID in hex, empty while unknown.
	// +optional
	ID string `json:"id,omitempty"`
	// Healthy is true when the member's pod is ready and the member answers.
	Healthy bool `json:"healthy"`
	// Leader is true for the raft leader.
	// +optional
	Leader bool `json:"leader,omitempty"`
	// Learner is true for a non-voting member that is catching up.
	// +optional
	Learner bool `json:"learner,omitempty"`
}

// SnapshotStatus records a verified snapshot.
type SnapshotStatus struct {
	// Location says where the snapshot is kept, for example pvc/<name>/<file>.
	Location string `json:"location"`
	// TakenAt is when the snapshot was taken.
	TakenAt metav1.Time `json:"takenAt"`
	// Revision is the etcd revision the snapshot holds.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Hash is the snapshot's integrity hash as etcdutl reports it.
	// +optional
	Hash int64 `json:"hash,omitempty"`
	// TotalKeys is the number of keys in the snapshot.
	// +optional
	TotalKeys int64 `json:"totalKeys,omitempty"`
	// SizeBytes is the snapshot's size.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Final is true for the snapshot taken because the cluster is being
	// deleted; the finalizer is released only once it is recorded.
	// +optional
	Final bool `json:"final,omitempty"`
}

// DatabaseClusterStatus is the observed state of an etcd cluster.
type DatabaseClusterStatus struct {
	// ObservedGeneration is the generation of the spec that the last
	// successful reconcile pass acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of member pods that exist.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of member pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Members lists every member, by pod name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Members []MemberStatus `json:"members,omitempty"`

	// Conditions: Available, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastSnapshot is the last verified snapshot.
	// +optional
	LastSnapshot *SnapshotStatus `json:"lastSnapshot,omitempty"`
}

// DatabaseCluster is an etcd cluster run as a StatefulSet behind a headless Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dbc,categories=gauntlet
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 45",message="metadata.name must be at most 45 characters: the operator names the cluster's children after it, and the backup CronJob, <name>-backup, must fit in 52"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a lowercase letter and hold only lowercase letters, digits and '-' (no '.'): it names the cluster's Services, which must be DNS labels"
type DatabaseCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec DatabaseClusterSpec `json:"spec"`
	// +optional
	Status DatabaseClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DatabaseClusterList is a list of DatabaseClusters.
type DatabaseClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DatabaseCluster `json:"items"`
}
