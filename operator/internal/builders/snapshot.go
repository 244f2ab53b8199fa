package builders

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Snapshot storage and the Job that fills it.
const (
	// SnapshotMountPath is where the snapshot volume is mounted in the Job.
	SnapshotMountPath = "/snapshots"
	// SnapshotSaveContainer saves the snapshot (etcdctl snapshot save).
	SnapshotSaveContainer = "save"
	// SnapshotVerifyContainer verifies it (etcdutl snapshot status); the
	// operator reads its log, a JSON object.
	SnapshotVerifyContainer = "verify"
	// LabelSnapshotOf names, on a snapshot claim, the cluster it holds
	// snapshots of. The claim has no owner: it outlives the cluster.
	LabelSnapshotOf = "database.gauntlet.dev/snapshot-of"
)

// SnapshotClaimName names the claim that keeps a cluster's snapshots.
func SnapshotClaimName(c *dbv1.DatabaseCluster) string { return c.Name + "-snapshots" }

// SnapshotJobName names the Job that takes the final snapshot.
func SnapshotJobName(c *dbv1.DatabaseCluster) string { return c.Name + "-final-snapshot" }

// SnapshotFile is the final snapshot's file name, unique per deletion.
func SnapshotFile(c *dbv1.DatabaseCluster) string {
	at := "undeleted"
	if c.DeletionTimestamp != nil {
		at = c.DeletionTimestamp.UTC().Format("20060102T150405Z")
	}
	return fmt.Sprintf("%s-%s.db", c.Name, at)
}

// SnapshotClaim is the volume the snapshots go to. It is deliberately not
// owned by the cluster, so that deleting the cluster leaves it (and the
// snapshot) behind; it is sized like one member's volume, which holds
// everything a snapshot can.
func SnapshotClaim(c *dbv1.DatabaseCluster) *corev1.PersistentVolumeClaim {
	size := c.Spec.Storage.Size
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	labels := Labels(c)
	labels[LabelSnapshotOf] = c.Name
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: SnapshotClaimName(c), Namespace: c.Namespace, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: c.Spec.Storage.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

// SnapshotJob saves a snapshot through the client Service (etcdctl takes
// one endpoint for a snapshot) into the snapshot claim, then verifies the
// file with etcdutl, whose JSON report (hash, revision, keys, size) the
// operator reads from the verify container's log. It runs the cluster's own
// image, which carries both tools, under the restricted Pod Security
// Standard, and is owned by the cluster (the claim is not).
func SnapshotJob(c *dbv1.DatabaseCluster, o Options) *batchv1.Job {
	file := SnapshotMountPath + "/" + SnapshotFile(c)
	endpoint := fmt.Sprintf("http://%s.%s.svc.%s:%d", ClientServiceName(c), c.Namespace, o.domain(), ClientPort)
	mount := []corev1.VolumeMount{{Name: "snapshots", MountPath: SnapshotMountPath}}
	save := snapshotContainer(c, SnapshotSaveContainer, "etcdctl", mount,
		"snapshot", "save", file, "--endpoints="+endpoint, "--dial-timeout=10s", "--command-timeout=5m")
	verify := snapshotContainer(c, SnapshotVerifyContainer, "etcdutl", mount,
		"snapshot", "status", file, "--write-out=json")
	return job(c, SnapshotJobName(c), "snapshot", 2, []corev1.Container{save}, []corev1.Container{verify},
		[]corev1.Volume{{Name: "snapshots", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: SnapshotClaimName(c)},
		}}})
}

// job is a Job of the cluster's, owned by it, whose one pod never restarts
// and runs under the restricted Pod Security Standard; it is retried
// backoff times. Its pod carries managed-by (which the operator's cache
// selects) but not the members' selector labels: it is no member.
func job(c *dbv1.DatabaseCluster, name, component string, backoff int32, init, containers []corev1.Container, volumes []corev1.Volume) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: c.Namespace, Labels: Labels(c),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(backoff),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					LabelInstance: c.Name, LabelComponent: component, LabelManagedBy: ManagerName,
				}},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					EnableServiceLinks: ptr.To(false),
					SecurityContext:    podSecurityContext(),
					InitContainers:     init,
					Containers:         containers,
					Volumes:            volumes,
				},
			},
		},
	}
}

func snapshotContainer(c *dbv1.DatabaseCluster, name, command string, mounts []corev1.VolumeMount, args ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: c.Spec.Image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{command}, Args: args, VolumeMounts: mounts,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(EtcdUID), RunAsGroup: ptr.To(EtcdUID), FSGroup: ptr.To(EtcdUID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
