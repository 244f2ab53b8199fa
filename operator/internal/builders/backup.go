package builders

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Scheduled backups.
const (
	// BackupContainer runs /backup; its termination message is the report.
	BackupContainer = "backup"
	// BackupCommand is the backup program in the backup image.
	BackupCommand = "/backup"
	// BackupWorkPath is a scratch volume where a snapshot is saved and
	// verified before it is stored.
	BackupWorkPath = "/work"
	// ComponentBackup marks backup Jobs and their pods.
	ComponentBackup = "backup"
	// BackupHistory is how many finished Jobs of each outcome the CronJob keeps.
	BackupHistory = 3
	// BackupDeadline bounds one backup Job.
	BackupDeadline = 600
	// BackupStartingDeadline skips a run that could not start within this
	// many seconds of its time (the next one comes at its own time).
	BackupStartingDeadline = 300
)

// Keys of the S3 credentials Secret, and the environment variables /backup
// reads them from.
const (
	S3AccessKeyIDKey     = "accessKeyID"
	S3SecretAccessKeyKey = "secretAccessKey"
	EnvS3AccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvS3SecretAccessKey = "AWS_SECRET_ACCESS_KEY"
)

// BackupCronJobName names the CronJob of a cluster's scheduled backups.
func BackupCronJobName(c *dbv1.DatabaseCluster) string { return c.Name + "-backup" }

// BackupJobLabels are on every backup Job and its pods: the operator finds
// them by these (the CronJob, not the cluster, controls the Jobs).
func BackupJobLabels(c *dbv1.DatabaseCluster) map[string]string {
	l := Labels(c)
	l[LabelComponent] = ComponentBackup
	return l
}

// BackupArgs are /backup's arguments for c's backup spec: the claim mounted
// at mountPath or the bucket, and scratch space at workPath.
func BackupArgs(c *dbv1.DatabaseCluster, o Options, mountPath, workPath string) []string {
	b := c.Spec.Backup
	args := []string{
		"--cluster=" + c.Name,
		fmt.Sprintf("--endpoints=http://%s.%s.svc.%s:%d", ClientServiceName(c), c.Namespace, o.domain(), ClientPort),
	}
	if s3 := b.Destination.S3; s3 != nil {
		args = append(args, S3Args(s3)...)
	} else {
		args = append(args, "--dir="+mountPath, "--claim="+SnapshotClaimName(c))
	}
	args = append(args, "--work-dir="+workPath)
	if n := b.Retention.Count; n != nil {
		args = append(args, "--retain-count="+strconv.Itoa(int(*n)))
	}
	if a := b.Retention.MaxAge; a != nil {
		args = append(args, "--retain-max-age="+a.Duration.String())
	}
	return args
}

// S3Args locate a bucket for /backup.
func S3Args(s3 *dbv1.S3Bucket) []string {
	args := []string{"--s3-endpoint=" + s3.Endpoint, "--s3-bucket=" + s3.Bucket}
	if s3.Prefix != "" {
		args = append(args, "--s3-prefix="+s3.Prefix)
	}
	if s3.Region != "" {
		args = append(args, "--s3-region="+s3.Region)
	}
	if s3.InsecureSkipTLSVerify {
		args = append(args, "--s3-insecure-skip-tls-verify")
	}
	return args
}

// S3CredentialKeys pairs each key of the credentials Secret with the
// environment variable /backup reads it from.
var S3CredentialKeys = []struct{ Key, Env string }{
	{S3AccessKeyIDKey, EnvS3AccessKeyID},
	{S3SecretAccessKeyKey, EnvS3SecretAccessKey},
}

// S3Env passes the credentials Secret's keys to /backup.
func S3Env(s3 *dbv1.S3Bucket) []*corev1ac.EnvVarApplyConfiguration {
	var env []*corev1ac.EnvVarApplyConfiguration
	for _, k := range S3CredentialKeys {
		env = append(env, corev1ac.EnvVar().WithName(k.Env).WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(
			corev1ac.SecretKeySelector().WithName(s3.CredentialsSecret.Name).WithKey(k.Key))))
	}
	return env
}

// BackupCronJob runs a verified backup on spec.backup.schedule into the
// cluster's snapshot claim or the bucket (whose keys come from the
// credentials Secret as environment variables). Runs never overlap (Forbid), a run that cannot
// start within five minutes of its time is skipped, and the last three Jobs
// of each outcome are kept for the operator to read and people to inspect.
// A failed run is not retried in place: its report says why, and the next
// scheduled run tries again. Call it only when spec.backup is set.
func BackupCronJob(c *dbv1.DatabaseCluster, o Options) *batchv1ac.CronJobApplyConfiguration {
	s3 := c.Spec.Backup.Destination.S3
	mounts := []*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().WithName("work").WithMountPath(BackupWorkPath)}
	volumes := []*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().WithName("work").WithEmptyDir(corev1ac.EmptyDirVolumeSource())}
	if s3 == nil {
		mounts = append(mounts, corev1ac.VolumeMount().WithName("snapshots").WithMountPath(SnapshotMountPath))
		volumes = append(volumes, corev1ac.Volume().WithName("snapshots").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(SnapshotClaimName(c))))
	}
	container := corev1ac.Container().
		WithName(BackupContainer).
		WithImage(o.BackupImage).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand(BackupCommand).
		WithArgs(BackupArgs(c, o, SnapshotMountPath, BackupWorkPath)...).
		WithVolumeMounts(mounts...).
		WithTerminationMessagePolicy(corev1.TerminationMessageReadFile).
		WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		})).
		WithSecurityContext(restrictedContainer())
	if s3 != nil {
		container.WithEnv(S3Env(s3)...)
	}
	pod := corev1ac.PodSpec().
		WithRestartPolicy(corev1.RestartPolicyNever).
		WithEnableServiceLinks(false).
		WithSecurityContext(restrictedPod()).
		WithContainers(container).
		WithVolumes(volumes...)
	return batchv1ac.CronJob(BackupCronJobName(c), c.Namespace).
		WithLabels(Labels(c)).
		WithOwnerReferences(ownerReference(c)).
		WithSpec(batchv1ac.CronJobSpec().
			WithSchedule(c.Spec.Backup.Schedule).
			WithConcurrencyPolicy(batchv1.ForbidConcurrent).
			WithStartingDeadlineSeconds(BackupStartingDeadline).
			WithSuccessfulJobsHistoryLimit(BackupHistory).
			WithFailedJobsHistoryLimit(BackupHistory).
			WithJobTemplate(batchv1ac.JobTemplateSpec().
				WithLabels(BackupJobLabels(c)).
				WithSpec(batchv1ac.JobSpec().
					WithBackoffLimit(0).
					WithActiveDeadlineSeconds(BackupDeadline).
					WithTemplate(corev1ac.PodTemplateSpec().
						WithLabels(map[string]string{
							LabelInstance: c.Name, LabelComponent: ComponentBackup, LabelManagedBy: ManagerName,
						}).
						WithSpec(pod)))))
}

// restrictedContainer and restrictedPod meet the restricted Pod Security
// Standard: non-root, no privilege escalation, no capabilities, a read-only
// root, RuntimeDefault seccomp.
func restrictedContainer() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithRunAsNonRoot(true).
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

func restrictedPod() *corev1ac.PodSecurityContextApplyConfiguration {
	return corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).WithRunAsUser(EtcdUID).WithRunAsGroup(EtcdUID).WithFSGroup(EtcdUID).
		WithFSGroupChangePolicy(corev1.FSGroupChangeOnRootMismatch).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}
