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

// RestoreFetchContainer downloads a backup from a bucket before the restore.
const RestoreFetchContainer = "fetch"

// RestoreJob restores spec.restoreFrom into member ordinal's claim, as a
// member of a new cluster made of members (the bootstrap members). From a
// volume, it mounts the snapshot claim read-only (the operator runs one Job
// at a time: the claim is ReadWriteOnce); from a bucket, a first container
// running /backup fetch downloads the object into scratch space, with the
// keys of the credentials Secret. etcdutl checks the snapshot's hash as it
// restores.
func RestoreJob(c *dbv1.DatabaseCluster, ordinal int, members []string, o Options) *batchv1.Job {
	name := MemberName(c, ordinal)
	data := corev1.Volume{Name: DataVolumeName, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: DataClaimName(name)}}}
	restore := func(file string, mount corev1.VolumeMount) corev1.Container {
		args := RestoreArgs(file, name, InitialCluster(c, o, members...), ClusterToken(c), PeerURL(c, name, o), DataDir)
		return snapshotContainer(c, RestoreContainer, "etcdutl", []corev1.VolumeMount{mount, {Name: DataVolumeName, MountPath: DataMountPath}}, args...)
	}
	if s3 := c.Spec.RestoreFrom.S3; s3 != nil {
		file := BackupWorkPath + "/snapshot.db"
		work := corev1.VolumeMount{Name: "work", MountPath: BackupWorkPath}
		fetch := snapshotContainer(c, RestoreFetchContainer, BackupCommand, []corev1.VolumeMount{work},
			append(append([]string{"fetch"}, S3Args(&s3.S3Bucket)...), "--key="+s3.Key, "--to="+file)...)
		fetch.Image = o.BackupImage
		fetch.Command = []string{BackupCommand}
		fetch.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		fetch.Env = s3EnvVars(&s3.S3Bucket)
		work.ReadOnly = true
		return job(c, RestoreJobName(c, ordinal), "restore", 1, []corev1.Container{fetch}, []corev1.Container{restore(file, work)}, []corev1.Volume{
			{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, data,
		})
	}
	src := c.Spec.RestoreFrom.Volume
	return job(c, RestoreJobName(c, ordinal), "restore", 1, nil, []corev1.Container{
		restore(SnapshotMountPath+"/"+src.File, corev1.VolumeMount{Name: "snapshots", MountPath: SnapshotMountPath, ReadOnly: true}),
	}, []corev1.Volume{
		{Name: "snapshots", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: src.ClaimName, ReadOnly: true}}},
		data,
	})
}

// s3EnvVars passes the credentials Secret's keys, as S3Env does for the CronJob.
func s3EnvVars(s3 *dbv1.S3Bucket) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, k := range S3CredentialKeys {
		env = append(env, corev1.EnvVar{Name: k.Env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: s3.CredentialsSecret.Name}, Key: k.Key,
		}}})
	}
	return env
}
