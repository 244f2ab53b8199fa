package builders

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func cluster(replicas int32) *dbv1.DatabaseCluster {
	return &dbv1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u1"},
		Spec: dbv1.DatabaseClusterSpec{
			Replicas: ptr.To(replicas),
			Image:    "etcd:v3.6.16",
			Storage:  dbv1.StorageSpec{Size: resource.MustParse("2Gi")},
		},
	}
}

func TestHeadlessService(t *testing.T) {
	g := NewWithT(t)
	svc := HeadlessService(cluster(3))
	g.Expect(*svc.Name).To(Equal("db"))
	g.Expect(*svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(*svc.Spec.PublishNotReadyAddresses).To(BeTrue(), "peers must resolve before they are ready")
	g.Expect(svc.Spec.Selector).To(Equal(map[string]string{LabelName: "etcd", LabelInstance: "db"}))
	g.Expect(svc.Spec.Ports).To(HaveLen(2))
	for _, p := range svc.Spec.Ports {
		g.Expect(*p.Protocol).To(Equal(corev1.ProtocolTCP), "protocol is part of the port's key and must be explicit")
	}
	g.Expect(svc.OwnerReferences).To(HaveLen(1))
	g.Expect(*svc.OwnerReferences[0].Controller).To(BeTrue())
}

func TestClientService(t *testing.T) {
	g := NewWithT(t)
	svc := ClientService(cluster(3))
	g.Expect(*svc.Name).To(Equal("db-client"))
	g.Expect(svc.Spec.ClusterIP).To(BeNil(), "a normal ClusterIP Service")
	g.Expect(svc.Spec.PublishNotReadyAddresses).To(BeNil(), "clients reach only ready members")
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(*svc.Spec.Ports[0].Port).To(Equal(ClientPort))
}

func TestPodDisruptionBudgetKeepsQuorum(t *testing.T) {
	for replicas, want := range map[int32]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4, 9: 5} {
		g := NewWithT(t)
		pdb := PodDisruptionBudget(cluster(replicas))
		g.Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(want), "replicas %d", replicas)
		g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(SelectorLabels(cluster(replicas))))
	}
}

func TestStatefulSet(t *testing.T) {
	g := NewWithT(t)
	c := cluster(3)
	c.Spec.Storage.StorageClassName = ptr.To("fast")
	c.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}}
	sts := StatefulSet(c, 3, Options{})

	g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(3))
	g.Expect(*sts.Spec.ServiceName).To(Equal(HeadlessServiceName(c)))
	g.Expect(*sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
	g.Expect(sts.Spec.Selector.MatchLabels).To(Equal(SelectorLabels(c)))
	g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue(LabelInstance, "db"))
	g.Expect(*sts.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType), "the operator replaces members one at a time")
	g.Expect(*sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled).To(Equal(appsv1.DeletePersistentVolumeClaimRetentionPolicyType))

	pvc := sts.Spec.VolumeClaimTemplates[0]
	g.Expect(*pvc.Name).To(Equal(DataVolumeName))
	g.Expect(pvc.Namespace).To(BeNil())
	g.Expect(pvc.Kind).To(BeNil())
	g.Expect(*pvc.Spec.StorageClassName).To(Equal("fast"))
	g.Expect(*pvc.Spec.VolumeMode).To(Equal(corev1.PersistentVolumeFilesystem), "defaulted by the server inside an atomic list")
	size := (*pvc.Spec.Resources.Requests)[corev1.ResourceStorage]
	g.Expect(size.String()).To(Equal("2Gi"))

	pod := sts.Spec.Template.Spec
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.SecurityContext.FSGroup).To(Equal(EtcdUID))
	g.Expect(*pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(pod.Containers).To(HaveLen(1))
	ctr := pod.Containers[0]
	g.Expect(*ctr.Image).To(Equal("etcd:v3.6.16"))
	g.Expect(*ctr.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(*ctr.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(ctr.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	for _, p := range []struct {
		name                      string
		probe                     *corev1ac.ProbeApplyConfiguration
		path, port                string
		period, timeout, failures int32
	}{
		{"readiness", ctr.ReadinessProbe, "/readyz", ClientPortName, 1, 1, 2},
		{"liveness", ctr.LivenessProbe, "/livez", MetricsPortName, 10, 5, 6},
	} {
		g.Expect(*p.probe.HTTPGet.Path).To(Equal(p.path), p.name)
		g.Expect(p.probe.HTTPGet.Port.String()).To(Equal(p.port), p.name)
		g.Expect(*p.probe.PeriodSeconds).To(Equal(p.period), p.name)
		g.Expect(*p.probe.TimeoutSeconds).To(Equal(p.timeout), p.name)
		g.Expect(*p.probe.FailureThreshold).To(Equal(p.failures), p.name)
	}
	g.Expect(ctr.StartupProbe).To(BeNil(), "a startup probe delays readiness by up to a period")
	g.Expect(*ctr.LivenessProbe.InitialDelaySeconds).To(Equal(int32(180)))
	g.Expect(*ctr.VolumeMounts[0].MountPath).To(Equal(DataMountPath))
	spread := sts.Spec.Template.Spec.TopologySpreadConstraints
	g.Expect(spread).To(HaveLen(1))
	g.Expect(*spread[0].MaxSkew).To(Equal(int32(1)))
	g.Expect(*spread[0].TopologyKey).To(Equal("kubernetes.io/hostname"))
	g.Expect(*spread[0].WhenUnsatisfiable).To(Equal(corev1.DoNotSchedule), "one member per node, not a preference")
	g.Expect(*spread[0].NodeTaintsPolicy).To(Equal(corev1.NodeInclusionPolicyHonor), "a tainted control plane is not a domain")
	g.Expect(spread[0].LabelSelector.MatchLabels).To(Equal(SelectorLabels(c)), "counts this cluster's members only")
	g.Expect(*ctr.EnvFrom[0].ConfigMapRef.Name).To(Equal(MembersConfigMapName(c)), "the initial cluster comes from the ConfigMap, not the template")
	g.Expect(*ctr.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError))
	g.Expect((*ctr.Resources.Limits)[corev1.ResourceMemory]).To(Equal(resource.MustParse("512Mi")))
	g.Expect(ctr.Resources.Requests).To(BeNil())
}

func TestStatefulSetOfARestoredClusterPrefersSpread(t *testing.T) {
	g := NewWithT(t)
	for _, from := range []dbv1.RestoreSource{
		{Volume: &dbv1.VolumeSnapshotSource{ClaimName: "snapshots"}},
		{S3: &dbv1.S3SnapshotSource{}},
	} {
		c := cluster(3)
		c.Spec.RestoreFrom = &from
		spread := StatefulSet(c, 3, Options{}).Spec.Template.Spec.TopologySpreadConstraints
		g.Expect(spread).To(HaveLen(1))
		g.Expect(*spread[0].WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway),
			"each member starts where its restore Job made its volume, on one node or several")
	}
}

func TestStatefulSetWithoutStorageClassUsesDefault(t *testing.T) {
	g := NewWithT(t)
	sts := StatefulSet(cluster(1), 1, Options{})
	g.Expect(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(BeNil())
	g.Expect(sts.Spec.Template.Spec.Containers[0].Resources).To(BeNil())
}

func TestEtcdArgs(t *testing.T) {
	cases := []struct {
		name   string
		domain string
		want   []string
	}{
		{"default domain", "", []string{
			"--name=$(POD_NAME)",
			"--data-dir=/var/lib/etcd/data",
			"--advertise-client-urls=http://$(POD_NAME).db.ns.svc.cluster.local:2379",
			"--initial-advertise-peer-urls=http://$(POD_NAME).db.ns.svc.cluster.local:2380",
			"--initial-cluster-token=ns-db-u1",
		}},
		{"custom domain", "k8s.example", []string{
			"--initial-advertise-peer-urls=http://$(POD_NAME).db.ns.svc.k8s.example:2380",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			args := EtcdArgs(cluster(3), Options{ClusterDomain: tc.domain})
			for _, want := range tc.want {
				g.Expect(args).To(ContainElement(want))
			}
			for _, a := range args {
				g.Expect(strings.HasPrefix(a, "--")).To(BeTrue(), "arg %q", a)
				g.Expect(a).NotTo(HavePrefix("--initial-cluster="), "the initial cluster changes with membership: it lives in the ConfigMap")
				g.Expect(a).NotTo(HavePrefix("--initial-cluster-state="))
			}
		})
	}
}

func TestMembersConfigMap(t *testing.T) {
	g := NewWithT(t)
	c := cluster(3)
	cm := MembersConfigMap(c, ClusterStateExisting, []string{"db-0", "db-1", "db-3"}, Options{})
	g.Expect(*cm.Name).To(Equal("db-members"))
	g.Expect(cm.Data).To(Equal(map[string]string{
		"ETCD_INITIAL_CLUSTER":       "db-0=http://db-0.db.ns.svc.cluster.local:2380,db-1=http://db-1.db.ns.svc.cluster.local:2380,db-3=http://db-3.db.ns.svc.cluster.local:2380",
		"ETCD_INITIAL_CLUSTER_STATE": "existing",
	}))
	g.Expect(cm.OwnerReferences).To(HaveLen(1))
	g.Expect(MemberNames(c, 2)).To(Equal([]string{"db-0", "db-1"}))
}

func TestMemberOrdinal(t *testing.T) {
	c := cluster(3)
	for name, want := range map[string]int{"db-0": 0, "db-7": 7, "db-12": 12} {
		if got, ok := MemberOrdinal(c, name); !ok || got != want {
			t.Errorf("MemberOrdinal(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "db", "db-", "db-x", "db-01", "db--1", "other-0", "dbx-0"} {
		if got, ok := MemberOrdinal(c, name); ok {
			t.Errorf("MemberOrdinal(%q) = %d, true; want no ordinal", name, got)
		}
	}
}

// childNames are the names of every object the operator creates for c,
// with the limit each must fit: 63 for what becomes a DNS label or a label
// value, 52 for the StatefulSet (its pods' controller-revision-hash label
// is <name>-<10-character hash>) and for a CronJob.
func childNames(c *dbv1.DatabaseCluster) map[string]int {
	names := map[string]int{
		HeadlessServiceName(c): 63, ClientServiceName(c): 63, PodDisruptionBudgetName(c): 253,
		MembersConfigMapName(c): 253, SnapshotClaimName(c): 253, SnapshotJobName(c): 63,
		c.Name: 63, // the instance label's value
	}
	names[StatefulSetName(c)] = 52
	names[BackupCronJobName(c)] = 52 // its Jobs are <name>-<minutes since the epoch>
	for i := range 9 {
		names[MemberName(c, i)] = 63
		names[DataClaimName(MemberName(c, i))] = 253
		names[RestoreJobName(c, i)] = 63
	}
	return names
}

// TestMaxNameLengthFitsEveryChild: the CRD's name limit is exactly the
// longest name whose every child fits, so admission refuses what the
// operator could not create, and nothing more.
func TestMaxNameLengthFitsEveryChild(t *testing.T) {
	g := NewWithT(t)
	fits := func(n int) bool {
		c := cluster(9)
		c.Name = "a" + strings.Repeat("b", n-1)
		for name, limit := range childNames(c) {
			if len(name) > limit {
				return false
			}
		}
		return true
	}
	g.Expect(fits(dbv1.MaxNameLength)).To(BeTrue(), "a %d-character name must fit", dbv1.MaxNameLength)
	g.Expect(fits(dbv1.MaxNameLength+1)).To(BeFalse(), "a %d-character name must not fit, or the limit is too strict", dbv1.MaxNameLength+1)
}

func backupCluster() *dbv1.DatabaseCluster {
	c := cluster(3)
	c.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    "*/5 * * * *",
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](7), MaxAge: &metav1.Duration{Duration: 168 * time.Hour}},
		Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}},
	}
	return c
}

func TestBackupCronJob(t *testing.T) {
	g := NewWithT(t)
	c := backupCluster()
	cj := BackupCronJob(c, Options{BackupImage: "gauntlet.dev/operator:v1"})
	g.Expect(*cj.Name).To(Equal("db-backup"))
	g.Expect(*cj.Namespace).To(Equal("ns"))
	g.Expect(cj.OwnerReferences).To(HaveLen(1))
	g.Expect(*cj.OwnerReferences[0].Controller).To(BeTrue())
	spec := cj.Spec
	g.Expect(*spec.Schedule).To(Equal("*/5 * * * *"))
	g.Expect(*spec.ConcurrencyPolicy).To(Equal(batchv1.ForbidConcurrent), "two backups never run at once")
	g.Expect(*spec.StartingDeadlineSeconds).To(Equal(int64(300)))
	g.Expect(*spec.SuccessfulJobsHistoryLimit).To(Equal(int32(3)))
	g.Expect(*spec.FailedJobsHistoryLimit).To(Equal(int32(3)))
	g.Expect(spec.TimeZone).To(BeNil())

	job := spec.JobTemplate
	g.Expect(job.Labels).To(Equal(map[string]string{
		LabelName: "etcd", LabelInstance: "db", LabelManagedBy: ManagerName, LabelComponent: "backup",
	}), "the operator finds the CronJob's Jobs by these labels")
	g.Expect(*job.Spec.BackoffLimit).To(Equal(int32(0)), "a failed run is reported, and the next one tries again")
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(int64(600)))
	tpl := job.Spec.Template
	g.Expect(tpl.Labels).To(Equal(map[string]string{LabelInstance: "db", LabelComponent: "backup", LabelManagedBy: ManagerName}),
		"managed-by puts the pod in the operator's cache; no member selector label")
	pod := tpl.Spec
	g.Expect(*pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
	g.Expect(*pod.EnableServiceLinks).To(BeFalse())
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.SecurityContext.FSGroup).To(Equal(EtcdUID), "the claim is writable by the backup user")
	g.Expect(pod.Containers).To(HaveLen(1))
	ctr := pod.Containers[0]
	g.Expect(*ctr.Name).To(Equal("backup"))
	g.Expect(*ctr.Image).To(Equal("gauntlet.dev/operator:v1"))
	g.Expect(ctr.Command).To(Equal([]string{"/backup"}))
	g.Expect(ctr.Args).To(Equal([]string{
		"--cluster=db",
		"--endpoints=http://db-client.ns.svc.cluster.local:2379",
		"--dir=/snapshots",
		"--claim=db-snapshots",
		"--work-dir=/work",
		"--retain-count=7",
		"--retain-max-age=168h0m0s",
	}))
	g.Expect(*ctr.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageReadFile), "the report is the termination message")
	g.Expect(*ctr.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(*ctr.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(ctr.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
	g.Expect(*ctr.Resources.Requests).To(HaveKey(corev1.ResourceCPU))
	mounts := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		mounts[*m.Name] = *m.MountPath
	}
	g.Expect(mounts).To(Equal(map[string]string{"snapshots": "/snapshots", "work": "/work"}))
	g.Expect(pod.Volumes).To(HaveLen(2))
	g.Expect(pod.Volumes[0].EmptyDir).NotTo(BeNil())
	g.Expect(*pod.Volumes[1].PersistentVolumeClaim.ClaimName).To(Equal("db-snapshots"))
	g.Expect(ctr.Env).To(BeEmpty())

	// Retention by count only, or by age only.
	c.Spec.Backup.Retention = dbv1.BackupRetention{Count: ptr.To[int32](1)}
	g.Expect(BackupCronJob(c, Options{}).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--retain-count=1"))
	c.Spec.Backup.Retention = dbv1.BackupRetention{MaxAge: &metav1.Duration{Duration: 90 * time.Minute}}
	args := BackupCronJob(c, Options{}).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	g.Expect(args).To(ContainElement("--retain-max-age=1h30m0s"))
	g.Expect(args).NotTo(ContainElement(HavePrefix("--retain-count")))
}

func TestBackupCronJobToABucket(t *testing.T) {
	g := NewWithT(t)
	c := backupCluster()
	c.Spec.Backup.Destination = dbv1.BackupDestination{S3: &dbv1.S3Bucket{
		Endpoint: "https://s3.example.com:9000", Bucket: "backups", Prefix: "prod/", Region: "eu-west-1",
		CredentialsSecret: dbv1.SecretReference{Name: "s3-keys"}, InsecureSkipTLSVerify: true,
	}}
	pod := BackupCronJob(c, Options{BackupImage: "op"}).Spec.JobTemplate.Spec.Template.Spec
	ctr := pod.Containers[0]
	g.Expect(ctr.Args).To(Equal([]string{
		"--cluster=db",
		"--endpoints=http://db-client.ns.svc.cluster.local:2379",
		"--s3-endpoint=https://s3.example.com:9000",
		"--s3-bucket=backups",
		"--s3-prefix=prod/",
		"--s3-region=eu-west-1",
		"--s3-insecure-skip-tls-verify",
		"--work-dir=/work",
		"--retain-count=7",
		"--retain-max-age=168h0m0s",
	}))
	g.Expect(ctr.Env).To(HaveLen(2))
	for i, want := range [][2]string{{"AWS_ACCESS_KEY_ID", "accessKeyID"}, {"AWS_SECRET_ACCESS_KEY", "secretAccessKey"}} {
		g.Expect(*ctr.Env[i].Name).To(Equal(want[0]))
		g.Expect(*ctr.Env[i].ValueFrom.SecretKeyRef.Name).To(Equal("s3-keys"))
		g.Expect(*ctr.Env[i].ValueFrom.SecretKeyRef.Key).To(Equal(want[1]))
	}
	g.Expect(pod.Volumes).To(HaveLen(1), "no claim: the bucket holds the backups")
	g.Expect(pod.Volumes[0].EmptyDir).NotTo(BeNil())
	g.Expect(ctr.VolumeMounts).To(HaveLen(1))
}
