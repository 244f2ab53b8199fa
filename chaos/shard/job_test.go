package shard

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func testJob() *batchv1.Job {
	return Job(JobOptions{Name: "explore-7", Namespace: "gauntlet-explore", Image: "gauntlet.dev/explore-shard:abc",
		Args: []string{"explore", "-f", "/gauntlet/scenarios", "--seed", "7", "--shard", Index + "/3"}, Shards: 3, Parallelism: 5, DeadlineSeconds: 900,
		CPU: resource.MustParse("500m"), Memory: resource.MustParse("1Gi")})
}

func TestJobIsIndexedAndDoesNotRetry(t *testing.T) {
	j := testJob()
	s := j.Spec
	if *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 3 {
		t.Errorf("completion mode %s with %d completions; want Indexed with one per shard", *s.CompletionMode, *s.Completions)
	}
	if *s.Parallelism != 3 {
		t.Errorf("parallelism %d; want it capped at the 3 shards", *s.Parallelism)
	}
	if *s.BackoffLimitPerIndex != 0 {
		t.Errorf("backoff limit per index %d; want 0: a seeded shard's retry repeats it", *s.BackoffLimitPerIndex)
	}
	if *s.ActiveDeadlineSeconds != 900 {
		t.Errorf("deadline %d", *s.ActiveDeadlineSeconds)
	}
	if j.Labels[LabelJob] != "explore-7" || s.Template.Labels[LabelJob] != "explore-7" {
		t.Errorf("labels %v / %v; want the job label on both", j.Labels, s.Template.Labels)
	}
	if got := Job(JobOptions{Shards: 4, Parallelism: 2}).Spec.Parallelism; *got != 2 {
		t.Errorf("parallelism %d; want the 2 asked for", *got)
	}
}

func TestJobShardArguments(t *testing.T) {
	c := testJob().Spec.Template.Spec.Containers[0]
	want := "explore -f /gauntlet/scenarios --seed 7 --shard $(JOB_COMPLETION_INDEX)/3"
	if got := strings.Join(c.Args, " "); got != want {
		t.Errorf("args\n %s\nwant\n %s", got, want)
	}
	if c.Image != "gauntlet.dev/explore-shard:abc" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s pulled %s; want the shard image, pulled only when missing (kind loads it)", c.Image, c.ImagePullPolicy)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		} else {
			env[e.Name] = e.Value
		}
	}
	for name, want := range map[string]string{
		EnvNamespace: "metadata.namespace",
		EnvJobName:   "metadata.labels['batch.kubernetes.io/job-name']",
		EnvJobUID:    "metadata.labels['batch.kubernetes.io/controller-uid']",
		"HOME":       "/tmp",
		"TMPDIR":     "/tmp",
		// Shards share a node's cores: envtest's API server gets longer
		// than its default 20 s to start.
		"KUBEBUILDER_CONTROLPLANE_START_TIMEOUT": "2m0s",
	} {
		if env[name] != want {
			t.Errorf("env %s = %q, want %q", name, env[name], want)
		}
	}
}

func TestJobPodIsRestricted(t *testing.T) {
	p := testJob().Spec.Template.Spec
	c := p.Containers[0]
	if p.RestartPolicy != corev1.RestartPolicyNever || p.ServiceAccountName != "explore-7-shard" {
		t.Errorf("restart %s, service account %s", p.RestartPolicy, p.ServiceAccountName)
	}
	if !*p.SecurityContext.RunAsNonRoot || *p.SecurityContext.RunAsUser != 65532 || p.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v; want non-root 65532 with the runtime's seccomp profile", p.SecurityContext)
	}
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v; want no escalation, a read-only root and no capabilities", sc)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" || p.Volumes[0].EmptyDir == nil {
		t.Errorf("mounts %v, volumes %v; want an emptyDir at /tmp, the only place a shard writes", c.VolumeMounts, p.Volumes)
	}
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.String() != "500m" {
		t.Errorf("cpu request %s", got.String())
	}
	if got := c.Resources.Limits[corev1.ResourceMemory]; got.String() != "2Gi" {
		t.Errorf("memory limit %s; want twice the 1Gi request", got.String())
	}
}

func TestRBACAllowsOnlyConfigMaps(t *testing.T) {
	sa, role, binding := RBAC("explore-7", "ns")
	if sa.Name != "explore-7-shard" || sa.Namespace != "ns" {
		t.Errorf("service account %s/%s", sa.Namespace, sa.Name)
	}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"configmaps"}) ||
		!slices.Equal(role.Rules[0].Verbs, []string{"create", "get", "update"}) {
		t.Errorf("rules %+v; want create/get/update of configmaps only", role.Rules)
	}
	if binding.RoleRef.Name != role.Name || binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != "ns" {
		t.Errorf("binding %+v does not bind %s to %s", binding, role.Name, sa.Name)
	}
}
