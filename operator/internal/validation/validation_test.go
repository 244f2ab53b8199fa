package validation

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func TestSchedule(t *testing.T) {
	for _, c := range []struct {
		schedule string
		want     string // "" when accepted
	}{
		{schedule: "0 3 * * *"},
		{schedule: "*/5 * * * *"},
		{schedule: "@daily"},
		{schedule: "@every 90m"},
		{schedule: "0 0 1 1 MON-FRI"},
		{schedule: "0 3 * *", want: "expected exactly 5 fields, found 4"},
		{schedule: "61 * * * *", want: "end of range (61) above maximum (59)"},
		{schedule: "every day", want: "not a cron schedule"},
		{schedule: "@fortnightly", want: "not a cron schedule"},
		{schedule: "TZ=Europe/Paris 0 3 * * *", want: "a time zone cannot be set inside the schedule"},
		{schedule: "CRON_TZ=UTC 0 3 * * *", want: "a time zone cannot be set inside the schedule"},
		// Schedules that parse but never fire, or fire too often.
		{schedule: "0 0 29 2 *"}, // leap days come within the horizon
		{schedule: "0 0 31 1-2 *"},
		{schedule: "0 0 31 2 1"}, // day-of-month or day-of-week: every Monday in February
		{schedule: "* * * * *"},
		{schedule: "@every 1m"},
		{schedule: "0 0 31 2 *", want: "never fires: no date matches its day-of-month and month (such as 31 February)"},
		{schedule: "0 0 30 2 *", want: "never fires"},
		{schedule: "0 0 31 4,6,9,11 *", want: "never fires"},
		{schedule: "@every 30s", want: `fires every 30s, more often than once a minute: use an interval of at least 1m, for example "@every 5m"`},
		{schedule: "@every 59s", want: "fires every 59s"},
		{schedule: "@every 0s", want: "fires every 1s, more often than once a minute: use an interval of at least 1m, for example \"@every 5m\" or \"*/5 * * * *\" (the cron library runs @every 0s every 1s: it counts in whole seconds, at least one)"},
		{schedule: "@every 500ms", want: "(the cron library runs @every 500ms every 1s"},
		{schedule: "@every -1h", want: "fires every 1s"},
		{schedule: "@every 90.5s"},
		{schedule: "@every 59.9s", want: "(the cron library runs @every 59.9s every 59s"},
	} {
		t.Run(c.schedule, func(t *testing.T) {
			g := NewWithT(t)
			err := Schedule(field.NewPath("spec", "backup", "schedule"), c.schedule)
			if c.want == "" {
				g.Expect(err).To(BeNil())
				return
			}
			g.Expect(err).NotTo(BeNil())
			g.Expect(err.Error()).To(HavePrefix("spec.backup.schedule: Invalid value: "))
			g.Expect(err.Error()).To(ContainSubstring(c.want))
		})
	}
}

func TestResources(t *testing.T) {
	q := resource.MustParse
	for _, c := range []struct {
		name string
		r    corev1.ResourceRequirements
		want []string // one message per mistake, in any order
	}{
		{name: "empty"},
		{name: "cpu and memory within limits", r: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("64Mi")},
			Limits:   corev1.ResourceList{"cpu": q("1"), "memory": q("64Mi")},
		}},
		{name: "requests without limits", r: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("2"), "ephemeral-storage": q("1Gi")}}},
		{name: "hugepages and an extended resource, request equal to limit", r: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"hugepages-2Mi": q("4Mi"), "example.com/gpu": q("1")},
			Limits:   corev1.ResourceList{"hugepages-2Mi": q("4Mi"), "example.com/gpu": q("1")},
		}},
		{name: "request above limit", r: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"memory": q("2Gi")}, Limits: corev1.ResourceList{"memory": q("1Gi")},
		}, want: []string{`spec.resources.requests[memory]: Invalid value: "2Gi": more than the limit of 1Gi`}},
		{name: "unknown name", r: corev1.ResourceRequirements{Requests: corev1.ResourceList{"gpu": q("1")}},
			want: []string{`spec.resources.requests[gpu]: Invalid value: "gpu": not a container resource: use cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified extended resource such as example.com/gpu`}},
		{name: "kubernetes.io domain", r: corev1.ResourceRequirements{Limits: corev1.ResourceList{"kubernetes.io/widgets": q("1")}},
			want: []string{`spec.resources.limits[kubernetes.io/widgets]: Invalid value: "kubernetes.io/widgets": the kubernetes.io domain has no such container resource`}},
		{name: "bad hugepages size", r: corev1.ResourceRequirements{Limits: corev1.ResourceList{"hugepages-big": q("1Gi")}},
			want: []string{`spec.resources.limits[hugepages-big]: Invalid value: "hugepages-big": not a hugepages size such as hugepages-2Mi`}},
		{name: "negative", r: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("-1")}},
			want: []string{`spec.resources.limits[cpu]: Invalid value: "-1": must not be negative`}},
		{name: "extended request without limit", r: corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1")}},
			want: []string{`spec.resources.limits[example.com/gpu]: Required value: example.com/gpu cannot be overcommitted: set a limit equal to the request`}},
		{name: "extended request below limit, fractional", r: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"example.com/gpu": q("500m")}, Limits: corev1.ResourceList{"example.com/gpu": q("1")},
		}, want: []string{
			`spec.resources.requests[example.com/gpu]: Invalid value: "500m": an extended resource is counted in whole units`,
			`spec.resources.requests[example.com/gpu]: Invalid value: "500m": example.com/gpu cannot be overcommitted: the request must equal the limit (1)`,
		}},
		{name: "claims", r: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			want: []string{`spec.resources.claims: Forbidden: resource claims need pod-level claims, which the operator does not add; remove them`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			var got []string
			for _, err := range Resources(field.NewPath("spec", "resources"), c.r) {
				got = append(got, err.Error())
			}
			g.Expect(got).To(ConsistOf(c.want))
		})
	}
}

func TestSpecChecksTheSchedule(t *testing.T) {
	g := NewWithT(t)
	c := &dbv1.DatabaseCluster{Spec: dbv1.DatabaseClusterSpec{
		Replicas: ptr.To[int32](3), Image: "etcd",
		Backup: &dbv1.BackupSpec{Schedule: "bad", Retention: dbv1.BackupRetention{Count: ptr.To[int32](1)},
			Destination: dbv1.BackupDestination{S3: &dbv1.S3Bucket{Bucket: "b"}}},
		RestoreFrom: &dbv1.RestoreSource{S3: &dbv1.S3SnapshotSource{Key: "k"}},
	}}
	var got []string
	for _, err := range Spec(c) {
		got = append(got, err.Field)
	}
	g.Expect(got).To(Equal([]string{"spec.backup.schedule"}))

	c.Spec.Backup.Schedule = "@daily"
	c.Spec.Backup.Destination = dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}}
	c.Spec.RestoreFrom = nil
	g.Expect(Spec(c)).To(BeEmpty(), "backups to the cluster's volume are carried out")
	c.Spec.Backup.Destination = dbv1.BackupDestination{S3: &dbv1.S3Bucket{Bucket: "b"}}
	g.Expect(Spec(c)).To(BeEmpty(), "and to a bucket")
}
