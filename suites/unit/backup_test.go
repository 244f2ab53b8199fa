package unit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

func withBackups(c *dbv1.DatabaseCluster, schedule string) {
	c.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    schedule,
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](3)},
		Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}},
	}
}

// finishBackup plays the CronJob controller and the kubelet: it creates a
// backup Job finished at `at` (complete or failed), and its pod whose backup
// container terminated with report as its message (none when nil).
func finishBackup(t *testing.T, w *reference.World, c *dbv1.DatabaseCluster, name string, at time.Time, complete bool, report *operator.BackupReport) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name, Labels: operator.BackupJobLabels(c)}}
	g.Expect(w.Client.Create(ctx, job)).To(Succeed())
	when := metav1.NewTime(at)
	if complete {
		job.Status.CompletionTime = &when
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: when}}
	} else {
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: when,
			Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	}
	g.Expect(w.Client.Status().Update(ctx, job)).To(Succeed())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-x1", Labels: map[string]string{batchv1.JobNameLabel: name}}}
	g.Expect(w.Client.Create(ctx, pod)).To(Succeed())
	if report != nil {
		msg, err := json.Marshal(report)
		g.Expect(err).NotTo(HaveOccurred())
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: operator.BackupContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{Message: string(msg), FinishedAt: when},
		}}}
		g.Expect(w.Client.Status().Update(ctx, pod)).To(Succeed())
	}
}

// TestScheduledBackups: spec.backup gives an owned CronJob and the snapshot
// claim; each finished backup Job is recorded in status.lastBackup from its
// report; a failed one (or one that leaves no report) turns Degraded True
// with reason BackupFailed, naming the Job and why; a later good one clears
// it; changing the schedule updates the CronJob and removing spec.backup
// deletes it.
func TestScheduledBackups(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	withBackups(c, "*/5 * * * *")
	w := reference.NewWorld(t, c)
	settle(t, w, c)

	cj := &batchv1.CronJob{}
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.BackupCronJobName(c)}, cj)).To(Succeed())
	g.Expect(cj.Spec.Schedule).To(Equal("*/5 * * * *"))
	g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(reference.BackupImage))
	g.Expect(metav1.IsControlledBy(cj, c)).To(BeTrue())
	claim := &corev1.PersistentVolumeClaim{}
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.SnapshotClaimName(c)}, claim)).To(Succeed())
	g.Expect(claim.OwnerReferences).To(BeEmpty(), "the claim outlives the cluster")
	g.Expect(c.Status.LastBackup).To(BeNil())

	t1 := time.Date(2026, 11, 24, 3, 0, 5, 0, time.UTC)
	good := &operator.BackupReport{Succeeded: true, Name: "db-backup-20261124T030000Z.db", Location: "pvc/db-snapshots/db-backup-20261124T030000Z.db",
		TakenAt: t1.Add(-5 * time.Second), Revision: 42, Hash: 7, TotalKeys: 3, SizeBytes: 24576, Kept: 1}
	finishBackup(t, w, c, "db-backup-29000000", t1, true, good)
	settle(t, w, c)
	g.Expect(c.Status.LastBackup).NotTo(BeNil())
	g.Expect(c.Status.LastBackup.Job).To(Equal("db-backup-29000000"))
	g.Expect(c.Status.LastBackup.Succeeded).To(BeTrue())
	g.Expect(c.Status.LastBackup.FinishedAt.Time).To(BeTemporally("==", t1))
	g.Expect(c.Status.LastBackup.Retained).To(Equal(int32(1)))
	want := &dbv1.SnapshotStatus{Location: good.Location, TakenAt: metav1.NewTime(good.TakenAt), Revision: 42, Hash: 7, TotalKeys: 3, SizeBytes: 24576}
	g.Expect(apiequality.Semantic.DeepEqual(c.Status.LastBackup.Snapshot, want)).To(BeTrue(), "got %+v, want %+v", c.Status.LastBackup.Snapshot, want)
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy))

	// A failed run: recorded as failed, with the report's reason.
	finishBackup(t, w, c, "db-backup-29000005", t1.Add(5*time.Minute), false,
		&operator.BackupReport{TakenAt: t1.Add(5 * time.Minute), Message: "saving the snapshot: no endpoint gave a snapshot"})
	settle(t, w, c)
	g.Expect(c.Status.LastBackup.Job).To(Equal("db-backup-29000005"))
	g.Expect(c.Status.LastBackup.Succeeded).To(BeFalse())
	g.Expect(c.Status.LastBackup.Snapshot).To(BeNil())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonBackupFailed).
		WithMessageContaining("the last scheduled backup, db-backup-29000005, failed: saving the snapshot: no endpoint gave a snapshot"))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy), "a failed backup does not make the database unavailable")

	// A Job that says it succeeded but left no report is not a backup.
	finishBackup(t, w, c, "db-backup-29000010", t1.Add(10*time.Minute), true, nil)
	settle(t, w, c)
	g.Expect(c.Status.LastBackup.Job).To(Equal("db-backup-29000010"))
	g.Expect(c.Status.LastBackup.Succeeded).To(BeFalse())
	g.Expect(c.Status.LastBackup.Message).To(ContainSubstring("left no report"))

	// Nor is one whose report says it failed, whatever the Job says.
	finishBackup(t, w, c, "db-backup-29000015", t1.Add(15*time.Minute), true, &operator.BackupReport{Message: "verifying the snapshot: integrity check failed"})
	settle(t, w, c)
	g.Expect(c.Status.LastBackup.Succeeded).To(BeFalse())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonBackupFailed).WithMessageContaining("integrity check failed"))

	// The next good one clears Degraded. An older Job finishing late does
	// not replace a newer record.
	finishBackup(t, w, c, "db-backup-29000020", t1.Add(20*time.Minute), true, good)
	finishBackup(t, w, c, "db-backup-28999990", t1.Add(-10*time.Minute), false, &operator.BackupReport{Message: "old"})
	settle(t, w, c)
	g.Expect(c.Status.LastBackup.Job).To(Equal("db-backup-29000020"))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy))

	// A new schedule updates the CronJob.
	update(t, w, c, func(c *dbv1.DatabaseCluster) { c.Spec.Backup.Schedule = "@hourly" })
	settle(t, w, c)
	g.Expect(w.Client.Get(ctx, client.ObjectKeyFromObject(cj), cj)).To(Succeed())
	g.Expect(cj.Spec.Schedule).To(Equal("@hourly"))

	// No spec.backup: no CronJob, and no backup failure can degrade the cluster.
	update(t, w, c, func(c *dbv1.DatabaseCluster) { c.Spec.Backup = nil })
	settle(t, w, c)
	g.Expect(w.Client.Get(ctx, client.ObjectKeyFromObject(cj), &batchv1.CronJob{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(w.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed(), "the backups already taken stay")
}

// TestBackupsNeedAnImage: an operator started without a backup image says so
// on the cluster that asks for backups, and creates no CronJob.
func TestBackupsNeedAnImage(t *testing.T) {
	g := NewWithT(t)
	c := reference.NewCluster("default", "db").Build()
	withBackups(c, "@daily")
	w := reference.NewWorld(t, c)
	w.Reconciler.Builders.BackupImage = ""
	settle(t, w, c)
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked).
		WithMessageContaining("spec.backup: the operator was started without a backup image"))
	g.Expect(w.Client.Get(t.Context(), client.ObjectKey{Namespace: c.Namespace, Name: operator.BackupCronJobName(c)}, &batchv1.CronJob{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy), "the database itself runs")
}

// TestInvalidBackupStopsOnlyBackups: a spec.backup that breaks a rule (one
// added by an operator upgrade, say, to a cluster admitted before it) stops
// the backups, named in Progressing=False/Blocked, and nothing else: the
// database is still created and runs.
func TestInvalidBackupStopsOnlyBackups(t *testing.T) {
	g := NewWithT(t)
	c := reference.NewCluster("default", "db").Build()
	withBackups(c, "@every 30s")
	w := reference.NewWorld(t, c)
	settle(t, w, c)
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked).
		WithMessageContaining("backups wait until spec.backup is fixed: spec.backup.schedule"))
	g.Expect(w.Client.Get(t.Context(), client.ObjectKey{Namespace: c.Namespace, Name: operator.BackupCronJobName(c)}, &batchv1.CronJob{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy), "the database itself runs")
}

// clusterBackingUpToABucket backs up daily to the bucket "backups" at
// https://s3.example.com, with the keys in Secret "s3-keys".
func clusterBackingUpToABucket() *dbv1.DatabaseCluster {
	c := reference.NewCluster("default", "db").Build()
	withBackups(c, "@daily")
	c.Spec.Backup.Destination = dbv1.BackupDestination{S3: &dbv1.S3Bucket{
		Endpoint: "https://s3.example.com", Bucket: "backups", CredentialsSecret: dbv1.SecretReference{Name: "s3-keys"},
	}}
	return c
}

// TestBackupsToABucket: a bucket destination needs its credentials Secret
// with both keys; until then Progressing=False/Blocked names the field and
// no CronJob exists. Then the CronJob passes the keys as environment
// variables, and no snapshot claim is made.
func TestBackupsToABucket(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := clusterBackingUpToABucket()
	w := reference.NewWorld(t, c)
	cronJob := client.ObjectKey{Namespace: c.Namespace, Name: operator.BackupCronJobName(c)}

	settle(t, w, c)
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked).
		WithMessageContaining(`spec.backup.destination.s3.credentialsSecret: Secret "s3-keys" does not exist`))
	g.Expect(w.Client.Get(ctx, cronJob, &batchv1.CronJob{})).To(Satisfy(apierrors.IsNotFound))

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "s3-keys"}, Data: map[string][]byte{"accessKeyID": []byte("ak")}}
	g.Expect(w.Client.Create(ctx, secret)).To(Succeed())
	settle(t, w, c)
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked).
		WithMessageContaining(`Secret "s3-keys" has no secretAccessKey`))

	secret.Data["secretAccessKey"] = []byte("sk")
	g.Expect(w.Client.Update(ctx, secret)).To(Succeed())
	settle(t, w, c)
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled))
	cj := &batchv1.CronJob{}
	g.Expect(w.Client.Get(ctx, cronJob, cj)).To(Succeed())
	env := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env
	g.Expect(env).To(HaveLen(2))
	g.Expect(env[0].ValueFrom.SecretKeyRef.Name).To(Equal("s3-keys"))
	g.Expect(w.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.SnapshotClaimName(c)}, &corev1.PersistentVolumeClaim{})).
		To(Satisfy(apierrors.IsNotFound), "the bucket holds the backups; no claim is made for them")
}

// unreachableBucket is a bucket the backup cannot reach: every request
// fails as an S3 client's does when nothing answers at the endpoint.
type unreachableBucket struct{}

func (unreachableBucket) List(context.Context) ([]string, error) { return nil, errUnreachable }
func (unreachableBucket) Put(context.Context, string, string) error {
	return fmt.Errorf("uploading to s3://backups/db-backup.db: %w", errUnreachable)
}
func (unreachableBucket) Delete(context.Context, string) error { return errUnreachable }
func (unreachableBucket) Location(name string) string          { return "s3://backups/" + name }

var errUnreachable = errors.New(`Put "https://s3.example.com/backups/db-backup.db": dial tcp 192.0.2.10:443: connect: connection refused`)

// runBackup is the operator's own backup code against store, its snapshot
// saved by save.
func runBackup(t *testing.T, store operator.BackupStore, save func(context.Context, string) error, at time.Time) *operator.BackupReport {
	t.Helper()
	r := operator.RunBackup(t.Context(), operator.BackupOptions{
		Cluster: "db", Store: store, Policy: operator.BackupPolicy{Count: 3}, WorkDir: t.TempDir(), Save: save,
		Verify: func(string) (operator.BackupFileStatus, error) {
			return operator.BackupFileStatus{Hash: 1, Revision: 1, TotalKey: 1, TotalSize: 4096}, nil
		},
		Now: func() time.Time { return at },
	})
	return &r
}

// TestBackupToABucketThatFails: what admission cannot know (the endpoint
// does not answer, the bucket is missing, the keys are wrong) shows when a
// backup runs, as Degraded True/BackupFailed naming
// spec.backup.destination.s3.endpoint as well as the error; a failure that
// is not the bucket's (saving the snapshot) does not blame it.
func TestBackupToABucketThatFails(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := clusterBackingUpToABucket()
	w := reference.NewWorld(t, c)
	g.Expect(w.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "s3-keys"},
		Data: map[string][]byte{"accessKeyID": []byte("ak"), "secretAccessKey": []byte("sk")}})).To(Succeed())
	settle(t, w, c)

	t1 := time.Date(2026, 11, 24, 3, 0, 5, 0, time.UTC)
	saved := func(_ context.Context, path string) error { return os.WriteFile(path, []byte("snapshot"), 0o600) }
	report := runBackup(t, unreachableBucket{}, saved, t1)
	g.Expect(report.Succeeded).To(BeFalse())
	finishBackup(t, w, c, "db-backup-29000000", t1, false, report)
	settle(t, w, c)
	want := `spec.backup.destination.s3.endpoint: could not write to bucket "backups" at https://s3.example.com; ` +
		`check the endpoint, the bucket and the keys in Secret "s3-keys": storing the snapshot: uploading to s3://backups/db-backup.db: ` + errUnreachable.Error()
	g.Expect(c.Status.LastBackup.Message).To(Equal(want))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonBackupFailed).
		WithMessageContaining("the last scheduled backup, db-backup-29000000, failed: " + want))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))

	// The members did not give a snapshot: nothing was asked of the bucket.
	report = runBackup(t, unreachableBucket{}, func(context.Context, string) error { return errors.New("no endpoint gave a snapshot") }, t1.Add(time.Hour))
	finishBackup(t, w, c, "db-backup-29000060", t1.Add(time.Hour), false, report)
	settle(t, w, c)
	g.Expect(c.Status.LastBackup.Message).To(Equal("saving the snapshot: no endpoint gave a snapshot"))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonBackupFailed).
		WithMessageContaining("failed: saving the snapshot: no endpoint gave a snapshot"))
}
