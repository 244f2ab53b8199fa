package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxNameLength is the longest DatabaseCluster name whose children's names
// all fit their limits: the tightest is the backup CronJob, <name>-backup,
// which may have at most 52 characters (its Jobs add a suffix and must fit
// in 63).
const MaxNameLength = 45

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

	// Resources of each etcd container. Requests may not exceed limits, and
	// only cpu, memory, ephemeral-storage, hugepages-<size> and
	// domain-qualified extended resources are accepted, as for any container.
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

	// Backup takes verified snapshots on a schedule and keeps as many as its
	// retention says.
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`
}

// RestoreSource names one snapshot: a file on a volume claim, or an object
// in an S3-compatible bucket. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.volume) != has(self.s3)",message="restoreFrom needs exactly one of volume or s3",messageExpression=`'restoreFrom needs exactly one of volume or s3, but ' + (has(self.volume) ? 'both are set' : 'neither is set')`
type RestoreSource struct {
	// Volume is a snapshot file on a claim in the cluster's namespace, such as
	// the final snapshot a deleted cluster left behind (its
	// status.lastSnapshot.location reads pvc/<claimName>/<file>).
	// +optional
	Volume *VolumeSnapshotSource `json:"volume,omitempty"`
	// S3 is a snapshot object in a bucket, such as a scheduled backup (its
	// status.lastBackup.location reads s3://<bucket>/<key>).
	// +optional
	S3 *S3SnapshotSource `json:"s3,omitempty"`
}

// VolumeSnapshotSource is a snapshot file on a PersistentVolumeClaim.
type VolumeSnapshotSource struct {
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

// S3SnapshotSource is a snapshot object in an S3-compatible bucket.
type S3SnapshotSource struct {
	S3Bucket `json:",inline"`
	// Key is the object's key under the prefix: status.lastBackup.location
	// reads s3://<bucket>/<prefix><key>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Key string `json:"key"`
}

// S3Bucket is an S3-compatible bucket and the credentials to reach it.
type S3Bucket struct {
	// Endpoint is the server's URL, for example https://s3.example.com:9000.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="endpoint must be an http:// or https:// URL with a host, for example https://s3.example.com:9000"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]+/?$')",message="endpoint must hold only a scheme, a host and an optional port, for example https://s3.example.com:9000: no user name or password (the keys come from credentialsSecret), path, query or fragment, which the S3 client would not use"
	// +required
	Endpoint string `json:"endpoint"`
	// Bucket is the bucket's name, by S3's naming rules: 3 to 63 lowercase
	// letters, digits, '.' and '-', starting and ending with a letter or
	// digit, with no '..', '.-' or '-.', not an IP address, and none of the
	// prefixes and suffixes AWS reserves.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="bucket must be an S3 bucket name: lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.contains('.-') && !self.contains('-.')",message="bucket must not contain two adjacent periods or a period next to a hyphen ('..', '.-' or '-.'); S3 refuses such names"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+([.][0-9]+){3}$')",message="bucket must not be formatted as an IP address (such as 192.168.5.4); S3 refuses such names"
	// +kubebuilder:validation:XValidation:rule="!['xn--', 'sthree-', 'amzn-s3-demo-'].exists(p, self.startsWith(p))",message="bucket must not start with a prefix S3 reserves: xn--, sthree- or amzn-s3-demo-"
	// +kubebuilder:validation:XValidation:rule="!['-s3alias', '--ol-s3', '.mrap', '--x-s3', '--table-s3'].exists(s, self.endsWith(s))",message="bucket must not end with a suffix S3 reserves: -s3alias, --ol-s3, .mrap, --x-s3 or --table-s3"
	// +required
	Bucket string `json:"bucket"`
	// Prefix is prepended to every object key, for example clusters/prod/.
	// It is relative: it does not start with '/', and has no empty, '.' or
	// '..' segment, which S3-compatible servers such as MinIO refuse.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="prefix must not start with '/': keys are relative to the bucket, for example clusters/prod/"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="prefix must not hold a '.' or '..' segment, for example clusters/prod/"
	// +kubebuilder:validation:XValidation:rule="!self.contains('//')",message="prefix must not hold an empty segment ('//'), for example clusters/prod/"
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Region is the bucket's region; servers that ignore regions accept the default.
	// +kubebuilder:default=us-east-1
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`
	// CredentialsSecret is a Secret in the cluster's namespace with the keys
	// accessKeyID and secretAccessKey.
	// +required
	CredentialsSecret SecretReference `json:"credentialsSecret"`
	// InsecureSkipTLSVerify turns off verification of an https endpoint's
	// certificate. Leave it false outside tests.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// SecretReference names a Secret in the cluster's namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="name must be a Secret name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +required
	Name string `json:"name"`
}

// BackupSpec schedules verified snapshots.
type BackupSpec struct {
	// Schedule is a cron schedule in the CronJob format: five fields (minute
	// hour day-of-month month day-of-week), for example "0 3 * * *", or a
	// macro such as @daily. It is checked at admission.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Schedule string `json:"schedule"`
	// Retention says how many backups to keep. The newest verified backup is
	// always kept.
	// +required
	Retention BackupRetention `json:"retention"`
	// Destination is where backups are written.
	// +required
	Destination BackupDestination `json:"destination"`
}

// BackupRetention keeps the newest Count backups, and drops backups older
// than MaxAge; with both, a backup goes when either says so.
// +kubebuilder:validation:XValidation:rule="has(self.count) || has(self.maxAge)",message="retention needs count, maxAge or both, but neither is set"
type BackupRetention struct {
	// Count is how many backups to keep, at least 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Count *int32 `json:"count,omitempty"`
	// MaxAge drops backups older than this: a duration in hours, minutes
	// and seconds, for example 168h or 1h30m, of at least 1m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]{1,6}([.][0-9]*)?|[.][0-9]+)h)?(([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m)?(([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s)?)$') && self.matches('[0-9]')",message="maxAge must be a duration in hours, minutes and seconds, for example 168h or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]{1,6}([.][0-9]*)?|[.][0-9]+)h)?(([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m)?(([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s)?)$') || !self.matches('[0-9]') || duration(self) >= duration('1m')",message="maxAge must be at least 1m, for example 168h"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupDestination is where backups go: the cluster's snapshot claim, or
// an S3-compatible bucket. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.volume) != has(self.s3)",message="destination needs exactly one of volume or s3",messageExpression=`'destination needs exactly one of volume or s3, but ' + (has(self.volume) ? 'both are set' : 'neither is set')`
type BackupDestination struct {
	// Volume writes backups to the cluster's snapshot claim
	// (<name>-snapshots), beside its final snapshot.
	// +optional
	Volume *VolumeDestination `json:"volume,omitempty"`
	// S3 writes backups to a bucket.
	// +optional
	S3 *S3Bucket `json:"s3,omitempty"`
}

// VolumeDestination is the cluster's own snapshot claim; it has no settings yet.
type VolumeDestination struct{}

// StorageSpec describes each member's persistent volume. It cannot change
// after creation, because a StatefulSet's volume claim templates cannot.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName)",fieldPath=".storageClassName",reason=FieldValueForbidden,message="storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: storageClassName cannot be added or removed",messageExpression=`has(self.storageClassName) ? 'storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: storageClassName cannot be added; remove it' : 'storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: storageClassName cannot be removed; keep ' + oldSelf.storageClassName`
type StorageSpec struct {
	// StorageClassName of the volume claims; empty uses the cluster's default
	// class. A class that does not exist is reported on the Progressing condition.
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

// BackupStatus records the outcome of the last scheduled backup.
type BackupStatus struct {
	// Job is the backup Job that ran.
	Job string `json:"job"`
	// Succeeded is true when the snapshot was written and verified.
	Succeeded bool `json:"succeeded"`
	// FinishedAt is when the Job finished.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Snapshot is the verified snapshot; it is set only when Succeeded.
	// +optional
	Snapshot *SnapshotStatus `json:"snapshot,omitempty"`
	// Retained is how many backups the destination held after this run's
	// retention.
	// +optional
	Retained int32 `json:"retained,omitempty"`
	// Message says why a backup failed.
	// +optional
	Message string `json:"message,omitempty"`
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

	// LastBackup is the outcome of the last scheduled backup.
	// +optional
	LastBackup *BackupStatus `json:"lastBackup,omitempty"`
}

// DatabaseCluster is an etcd cluster run as a StatefulSet behind a headless Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

// Hub marks v1beta1 as the version every other version converts through.
func (*DatabaseCluster) Hub() {}

// GetConditions returns the status conditions; the Gauntlet condition
// assertions read conditions through this method.
func (c *DatabaseCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// DesiredReplicas returns spec.replicas, treating an unset value as 0.
func (c *DatabaseCluster) DesiredReplicas() int32 {
	if c.Spec.Replicas == nil {
		return 0
	}
	return *c.Spec.Replicas
}

// +kubebuilder:object:root=true

// DatabaseClusterList is a list of DatabaseClusters.
type DatabaseClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DatabaseCluster `json:"items"`
}
