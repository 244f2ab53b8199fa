package snapshot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd/etcdlocal"
)

func deletingCluster() *dbv1.DatabaseCluster {
	return &dbv1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db", Namespace: "ns", UID: "u1", Finalizers: []string{dbv1.Finalizer},
			DeletionTimestamp: ptr.To(metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))),
		},
		Spec: dbv1.DatabaseClusterSpec{
			Replicas: ptr.To[int32](3), Image: "gauntlet.dev/etcd:v3.6.16",
			Storage: dbv1.StorageSpec{Size: resource.MustParse("2Gi")},
		},
	}
}

type fakeLogs map[string]string

func (f fakeLogs) ContainerLog(_ context.Context, ns, pod, container string) (string, error) {
	log, ok := f[ns+"/"+pod+"/"+container]
	if !ok {
		return "", fmt.Errorf("no log for %s/%s/%s", ns, pod, container)
	}
	return log, nil
}

func newFake(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := dbv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&batchv1.Job{}).Build()
}

const report = `{"hash":3126434373,"revision":42,"totalKey":7,"totalSize":24576,"version":"3.6.0"}`

func TestFinalSnapshotThroughAJob(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := deletingCluster()
	cl := newFake(t)
	logs := fakeLogs{}
	s := &Job{Client: cl, Logs: logs}

	// First call: the claim (unowned, so it outlives the cluster) and the Job.
	snap, err := s.FinalSnapshot(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap).To(BeNil(), "in progress")
	claim := &corev1.PersistentVolumeClaim{}
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-snapshots"}, claim)).To(Succeed())
	g.Expect(claim.OwnerReferences).To(BeEmpty())
	g.Expect(claim.Labels).To(HaveKeyWithValue(builders.LabelSnapshotOf, "db"))
	job := &batchv1.Job{}
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-final-snapshot"}, job)).To(Succeed())
	g.Expect(job.OwnerReferences).To(HaveLen(1))
	g.Expect(job.Spec.Template.Spec.InitContainers[0].Args).To(ContainElement("--endpoints=http://db-client.ns.svc.cluster.local:2379"))
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"snapshot", "status", "/snapshots/db-20261122T100000Z.db", "--write-out=json"}))

	// Still running: nothing yet.
	snap, err = s.FinalSnapshot(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap).To(BeNil())

	// Complete, with the verify container's report in its pod's log.
	done := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC))
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	job.Status.CompletionTime = &done
	g.Expect(cl.Status().Update(ctx, job)).To(Succeed())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-final-snapshot-x1", Labels: map[string]string{batchv1.JobNameLabel: job.Name}}}
	g.Expect(cl.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodSucceeded
	g.Expect(cl.Status().Update(ctx, pod)).To(Succeed())
	logs["ns/db-final-snapshot-x1/verify"] = `{"level":"info","msg":"deprecated flag"}` + "\n" + report + "\n"

	snap, err = s.FinalSnapshot(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.TakenAt.Equal(&done)).To(BeTrue(), "taken at the Job's completion, not %v", snap.TakenAt)
	snap.TakenAt = done
	g.Expect(snap).To(Equal(&dbv1.SnapshotStatus{
		Location: "pvc/db-snapshots/db-20261122T100000Z.db", TakenAt: done,
		Revision: 42, Hash: 3126434373, TotalKeys: 7, SizeBytes: 24576,
	}))
}

func TestFailedSnapshotJobIsReportedAndRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := deletingCluster()
	job := builders.SnapshotJob(c, builders.Options{})
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	cl := newFake(t, job)
	s := &Job{Client: cl, Logs: fakeLogs{}}

	_, err := s.FinalSnapshot(ctx, c)
	g.Expect(err).To(MatchError(ContainSubstring("BackoffLimitExceeded")))
	err = cl.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the failed Job is deleted so that the retry starts afresh")
	snap, err := s.FinalSnapshot(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap).To(BeNil())
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})).To(Succeed(), "a new Job")
}

func TestSnapshotClaimOfAnotherClusterIsNotUsed(t *testing.T) {
	g := NewWithT(t)
	c := deletingCluster()
	other := builders.SnapshotClaim(c)
	other.Labels[builders.LabelSnapshotOf] = "someone-else"
	s := &Job{Client: newFake(t, other), Logs: fakeLogs{}}
	_, err := s.FinalSnapshot(t.Context(), c)
	g.Expect(err).To(MatchError(ErrClaimTaken))
}

func TestParseReport(t *testing.T) {
	cases := []struct {
		name, log, err string
		want           int64
	}{
		{name: "alone", log: report, want: 42},
		{name: "among log lines", log: "{\"level\":\"warn\"}\n" + report + "\ntrailing\n", want: 42},
		{name: "missing", log: "Error: open /snapshots/x.db: no such file\n", err: "no etcdutl snapshot status report"},
		{name: "empty keyspace", log: `{"hash":380160980,"revision":0,"totalKey":0,"totalSize":20480,"version":"3.6.0"}`, want: 0},
		{name: "no bytes", log: `{"hash":0,"revision":0,"totalKey":0,"totalSize":0}`, err: "unusable snapshot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := ParseReport(tc.log)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Revision).To(Equal(tc.want))
		})
	}
}

// TestSnapshotJobCommandsAgainstRealEtcd runs the Job's two containers'
// commands, exactly as built, with the etcdctl and etcdutl the project
// builds, against a real etcd on loopback (the client Service's URL and the
// claim's mount point are the only substitutions), and parses the verify
// report as the operator does.
func TestSnapshotJobCommandsAgainstRealEtcd(t *testing.T) {
	g := NewWithT(t)
	bin := etcdlocal.Binary(t)
	local := etcdlocal.Start(t, bin, 1)
	raw, err := clientv3.New(clientv3.Config{Endpoints: local.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = raw.Close() }()
	for i := range 5 {
		_, err := raw.Put(t.Context(), fmt.Sprintf("k%d", i), "v")
		g.Expect(err).NotTo(HaveOccurred())
	}

	c := deletingCluster()
	job := builders.SnapshotJob(c, builders.Options{})
	dir := t.TempDir()
	run := func(ctr corev1.Container) string {
		args := make([]string, len(ctr.Args))
		for i, a := range ctr.Args {
			a = strings.ReplaceAll(a, "http://db-client.ns.svc.cluster.local:2379", local.ClientURL(0))
			args[i] = strings.ReplaceAll(a, builders.SnapshotMountPath, dir)
		}
		cmd := exec.CommandContext(t.Context(), filepath.Join(filepath.Dir(bin), ctr.Command[0]), args...)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s %v:\n%s", ctr.Command[0], args, out)
		return string(out)
	}
	run(job.Spec.Template.Spec.InitContainers[0])
	_, err = os.Stat(filepath.Join(dir, builders.SnapshotFile(c)))
	g.Expect(err).NotTo(HaveOccurred(), "the snapshot file")
	r, err := ParseReport(run(job.Spec.Template.Spec.Containers[0]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.TotalKey).To(BeNumerically(">=", 5))
	g.Expect(r.Revision).To(BeNumerically(">=", 6))
	t.Logf("etcdutl verified the snapshot: revision %d, %d keys, %d bytes, hash %d", r.Revision, r.TotalKey, r.TotalSize, r.Hash)
}

// TestRestoreJobCommandAgainstRealEtcd takes a snapshot of a real etcd
// holding some keys, restores it with the restore Job's etcdutl arguments
// (builders.RestoreArgs) into the data directories of a new 3-member
// cluster, starts that cluster from them and reads every key back.
func TestRestoreJobCommandAgainstRealEtcd(t *testing.T) {
	g := NewWithT(t)
	bin := etcdlocal.Binary(t)
	source := etcdlocal.Start(t, bin, 1)
	raw, err := clientv3.New(clientv3.Config{Endpoints: source.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = raw.Close() }()
	const keys = 20
	for i := range keys {
		_, err := raw.Put(t.Context(), fmt.Sprintf("restore/k%02d", i), fmt.Sprintf("v%02d", i))
		g.Expect(err).NotTo(HaveOccurred())
	}
	file := filepath.Join(t.TempDir(), "db.db")
	out, err := exec.CommandContext(t.Context(), filepath.Join(filepath.Dir(bin), "etcdctl"),
		"snapshot", "save", file, "--endpoints="+source.ClientURL(0)).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "etcdctl snapshot save: %s", out)

	restored := etcdlocal.StartWith(t, bin, 3, etcdlocal.Options{Prepare: func(m etcdlocal.Member) {
		g.Expect(os.Remove(m.DataDir)).To(Succeed(), "etcdutl creates the data directory itself")
		args := builders.RestoreArgs(file, m.Name, m.InitialCluster, m.Token, m.PeerURL, m.DataDir)
		out, err := exec.CommandContext(t.Context(), filepath.Join(filepath.Dir(bin), "etcdutl"), args...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "etcdutl %v:\n%s", args, out)
	}})
	for i := range restored.Size() {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{restored.ClientURL(i)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := cli.Get(t.Context(), "restore/", clientv3.WithPrefix(), clientv3.WithSerializable())
		_ = cli.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Kvs).To(HaveLen(keys), "member %s", restored.Name(i))
		g.Expect(string(resp.Kvs[keys-1].Value)).To(Equal(fmt.Sprintf("v%02d", keys-1)))
	}
	t.Logf("a 3-member cluster restored from a snapshot serves all %d keys from every member", keys)
}

func TestSnapshotThatDoesNotVerifyIsTakenAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := deletingCluster()
	job := builders.SnapshotJob(c, builders.Options{})
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Status:     corev1.PodStatus{Phase: corev1.PodSucceeded},
	}
	cl := newFake(t, job, pod)
	s := &Job{Client: cl, Logs: fakeLogs{"ns/p1/verify": `{"hash":0,"revision":3,"totalKey":1,"totalSize":0}`}}
	_, err := s.FinalSnapshot(ctx, c)
	g.Expect(err).To(MatchError(ContainSubstring("did not verify")))
	g.Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}))).To(BeTrue(), "the Job is deleted so that the snapshot is taken again")
}
