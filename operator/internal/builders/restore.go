package builders

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// RestoreContainer restores one member's data directory (etcdutl snapshot restore).
const RestoreContainer = "restore"

// ClusterToken is the members' --initial-cluster-token: unique per cluster
// object, so that members of two clusters can never join each other.
func ClusterToken(c *dbv1.DatabaseCluster) string {
	return c.Namespace + "-" + c.Name + "-" + string(c.UID)
}

// RestoreArgs are etcdutl's arguments to restore a snapshot file into
// dataDir as member name of a new cluster with the given initial cluster.
func RestoreArgs(file, name, initialCluster, token, peerURL, dataDir string) []string {
	return []string{
		"snapshot", "restore", file,
		"--name=" + name,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-token=" + token,
		"--initial-advertise-peer-urls=" + peerURL,
		"--data-dir=" + dataDir,
	}
}

// RestoreJobName names the Job that restores member ordinal.
func RestoreJobName(c *dbv1.DatabaseCluster, ordinal int) string {
	return fmt.Sprintf("%s-restore-%d", c.Name, ordinal)
}

// MemberClaim is a member's data claim as the StatefulSet would create it
// (same name, labels and spec), created ahead of the StatefulSet so that a
// restore can fill it; the StatefulSet then uses it as its own.
func MemberClaim(c *dbv1.DatabaseCluster, member string) *corev1.PersistentVolumeClaim {
	owner := OwnerReference(c)
	owner.Controller, owner.BlockOwnerDeletion = nil, nil // the StatefulSet may take control
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: DataClaimName(member), Namespace: c.Namespace, Labels: SelectorLabels(c),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			StorageClassName: c.Spec.Storage.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: c.Spec.Storage.Size}},
		},
	}
}

// RestoreJob restores spec.restoreFrom.volume into member ordinal's claim, as
// a member of a new cluster made of members (the bootstrap members). The
// operator runs one at a time: the snapshot claim is ReadWriteOnce. Call it
// only when spec.restoreFrom.volume is set.
func RestoreJob(c *dbv1.DatabaseCluster, ordinal int, members []string, o Options) *batchv1.Job {
	name := MemberName(c, ordinal)
	src := c.Spec.RestoreFrom.Volume
	args := RestoreArgs(SnapshotMountPath+"/"+src.File, name, InitialCluster(c, o, members...), ClusterToken(c), PeerURL(c, name, o), DataDir)
	ctr := snapshotContainer(c, RestoreContainer, "etcdutl", []corev1.VolumeMount{
		{Name: "snapshots", MountPath: SnapshotMountPath, ReadOnly: true},
		{Name: DataVolumeName, MountPath: DataMountPath},
	}, args...)
	return job(c, RestoreJobName(c, ordinal), "restore", 1, nil, []corev1.Container{ctr}, []corev1.Volume{
		{Name: "snapshots", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: src.ClaimName, ReadOnly: true}}},
		{Name: DataVolumeName, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: DataClaimName(name)}}},
	})
}
