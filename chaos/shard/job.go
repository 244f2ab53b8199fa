package shard

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Labels and environment variables a shard's pod and its ConfigMap carry.
const (
	// LabelJob names the campaign's Job on its shards' ConfigMaps.
	LabelJob = "gauntlet.dev/explore-job"
	// LabelShard is a ConfigMap's shard index.
	LabelShard = "gauntlet.dev/explore-shard"
	// ResultsKey is the ConfigMap's key holding the shard's results, a
	// gzipped tar of its explore.json, report.json and findings.
	ResultsKey = "results.tar.gz"

	EnvNamespace = "GAUNTLET_SHARD_NAMESPACE"
	EnvJobName   = "GAUNTLET_SHARD_JOB"
	EnvJobUID    = "GAUNTLET_SHARD_JOB_UID"
	EnvIndex     = "JOB_COMPLETION_INDEX" // set by the Job controller
	// Index, in a shard's arguments, is its index (the kubelet expands it).
	Index = "$(" + EnvIndex + ")"
	// ReportDir is where a shard's pod writes its campaign's report.
	ReportDir = "/tmp/report"
)

// envtestStartTimeout bounds the start of a shard's API server: envtest's
// default, 20 s, is too short where shards share a node's cores (an API
// server started beside two campaigns on 2 cores missed it five times).
const envtestStartTimeout = 2 * time.Minute

// JobOptions shape a campaign's Job.
type JobOptions struct {
	Name, Namespace string
	// Image is the shard image (a bundle of gauntlet, envtest and the
	// operator); Args are gauntlet's arguments, the command first, where
	// Index stands for the shard's index.
	Image string
	Args  []string
	// Env are further variables of each shard's container.
	Env []corev1.EnvVar
	// Shards is the Job's completions; Parallelism how many run at once
	// (default: all).
	Shards, Parallelism int
	// Deadline bounds the Job (its activeDeadlineSeconds).
	DeadlineSeconds int64
	// CPU and Memory are each shard's requests; the limit on memory is
	// twice the request.
	CPU, Memory resource.Quantity
}

// ServiceAccountName is the shards' ServiceAccount, allowed to write
// their ConfigMaps and nothing else.
func ServiceAccountName(job string) string { return job + "-shard" }

// Job is the Indexed Job of a campaign's shards: shard k runs gauntlet
// with its arguments (explore --shard k/n, say) on its own envtest and
// publishes its results. An index that fails is not retried (a
// campaign's runs are seeded: a retry would only repeat them) and does
// not stop its siblings.
func Job(o JobOptions) *batchv1.Job {
	parallel := o.Parallelism
	if parallel <= 0 || parallel > o.Shards {
		parallel = o.Shards
	}
	labels := map[string]string{LabelJob: o.Name}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode:        ptr.To(batchv1.IndexedCompletion),
			Completions:           ptr.To(int32(o.Shards)),
			Parallelism:           ptr.To(int32(parallel)),
			BackoffLimitPerIndex:  ptr.To(int32(0)),
			ActiveDeadlineSeconds: ptr.To(o.DeadlineSeconds),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       podSpec(o),
			},
		},
	}
}

func podSpec(o JobOptions) corev1.PodSpec {
	limit := o.Memory.DeepCopy()
	limit.Add(o.Memory)
	return corev1.PodSpec{
		ServiceAccountName: ServiceAccountName(o.Name),
		RestartPolicy:      corev1.RestartPolicyNever,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(int64(65532)),
			RunAsGroup:     ptr.To(int64(65532)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            "shard",
			Image:           o.Image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Args:            o.Args,
			Env: append([]corev1.EnvVar{
				fieldEnv(EnvNamespace, "metadata.namespace"),
				fieldEnv(EnvJobName, "metadata.labels['batch.kubernetes.io/job-name']"),
				fieldEnv(EnvJobUID, "metadata.labels['batch.kubernetes.io/controller-uid']"),
				{Name: "HOME", Value: "/tmp"},
				{Name: "TMPDIR", Value: "/tmp"},
				{Name: "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", Value: envtestStartTimeout.String()},
			}, o.Env...),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: o.CPU, corev1.ResourceMemory: o.Memory},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
		}},
		Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// RBAC is what the shards may do: create their ConfigMaps in the Job's
// namespace (and read one back, to replace it when a shard reruns).
func RBAC(job, namespace string) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	name := ServiceAccountName(job)
	meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{LabelJob: job}}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"create", "get", "update"}}},
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
	}
	return sa, role, binding
}

// ConfigMapName is shard k's ConfigMap.
func ConfigMapName(job string, k int) string { return job + "-shard-" + strconv.Itoa(k) }
