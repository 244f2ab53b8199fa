package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/jobs"
	"github.com/gauntlet-dev/gauntlet/operator/internal/snapshot"
)

// reconcileBackup keeps the backup CronJob in line with spec.backup (applied
// while it is set, deleted when it is removed), makes sure the snapshot claim
// the backups go to exists, and records the outcome of the newest finished
// backup Job in status.lastBackup.
func (r *Reconciler) reconcileBackup(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if c.Spec.Backup == nil {
		return ctrl.Result{}, r.removeBackupCronJob(ctx, c)
	}
	if s.invalidBackup != nil {
		// The CronJob, if one runs, is left as it was: its spec was valid
		// when it was applied.
		s.blocked = fmt.Errorf("backups wait until spec.backup is fixed: %w", s.invalidBackup)
		return ctrl.Result{}, nil
	}
	if r.Builders.BackupImage == "" {
		s.blocked = errors.New("spec.backup: the operator was started without a backup image (--backup-image), so it cannot run backups")
		return ctrl.Result{}, nil
	}
	if s3 := c.Spec.Backup.Destination.S3; s3 != nil {
		if err := r.checkCredentials(ctx, c, "spec.backup.destination.s3.credentialsSecret", s3); err != nil {
			s.blocked = err
			return s.requeueAfter(MissingReferenceRecheck)
		}
	} else if err := snapshot.EnsureClaim(ctx, r.Client, c); err != nil {
		if errors.Is(err, snapshot.ErrClaimTaken) {
			s.blocked = fmt.Errorf("spec.backup.destination.volume: %w", err)
			return s.requeueAfter(ForeignChildRecheckInterval)
		}
		return ctrl.Result{}, err
	}
	desired := builders.BackupCronJob(c, r.Builders)
	existing := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: c.Namespace}}
	if _, err := applyChild(ctx, r.Client, &r.applied, c, "CronJob", existing, desired, batchv1ac.ExtractCronJob); err != nil {
		return s.childError(err)
	}
	return ctrl.Result{}, r.recordLastBackup(ctx, c)
}

// checkCredentials makes sure the credentials Secret exists and holds both
// keys (field names it in the message): a Job without them would never start (its pod waits on the
// Secret) with the reason only in the pod's events.
func (r *Reconciler) checkCredentials(ctx context.Context, c *dbv1.DatabaseCluster, field string, s3 *dbv1.S3Bucket) error {
	secret := &corev1.Secret{}
	name := s3.CredentialsSecret.Name
	switch err := r.reader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret); {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: Secret %q does not exist in namespace %q; it is used once it does", field, name, c.Namespace)
	case err != nil:
		return fmt.Errorf("reading the credentials Secret %s: %w", name, err)
	}
	for _, k := range builders.S3CredentialKeys {
		if len(secret.Data[k.Key]) == 0 {
			return fmt.Errorf("%s: Secret %q has no %s", field, name, k.Key)
		}
	}
	return nil
}

func (r *Reconciler) removeBackupCronJob(ctx context.Context, c *dbv1.DatabaseCluster) error {
	cj := &batchv1.CronJob{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builders.BackupCronJobName(c)}, cj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the backup CronJob: %w", err)
	case !metav1.IsControlledBy(cj, c):
		return nil // not ours: leave it alone
	}
	if err := r.Client.Delete(ctx, cj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the backup CronJob: %w", err)
	}
	r.event(c, corev1.EventTypeNormal, "BackupsStopped", "DeleteCronJob", "spec.backup was removed: deleted CronJob %s", cj.Name)
	return nil
}

// recordLastBackup sets status.lastBackup from the newest finished backup
// Job, when it is not the one already recorded.
func (r *Reconciler) recordLastBackup(ctx context.Context, c *dbv1.DatabaseCluster) error {
	list := &batchv1.JobList{}
	if err := r.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(builders.BackupJobLabels(c))); err != nil {
		return fmt.Errorf("listing backup Jobs: %w", err)
	}
	var newest *batchv1.Job
	var newestAt time.Time
	for i := range list.Items {
		job := &list.Items[i]
		at, done := jobs.FinishedAt(job)
		if done && (newest == nil || at.After(newestAt)) {
			newest, newestAt = job, at
		}
	}
	if newest == nil || (c.Status.LastBackup != nil && c.Status.LastBackup.Job == newest.Name) {
		return nil
	}
	last, err := r.backupOutcome(ctx, c, newest, newestAt)
	if err != nil {
		return err
	}
	c.Status.LastBackup = last
	if last.Succeeded {
		r.event(c, corev1.EventTypeNormal, "BackupSucceeded", "Backup", "backup %s verified and stored at %s", newest.Name, last.Snapshot.Location)
	} else {
		r.event(c, corev1.EventTypeWarning, dbv1.ReasonBackupFailed, "Backup", "backup %s failed: %s", newest.Name, last.Message)
	}
	return nil
}

// backupOutcome reads the report the backup container left as its
// termination message. A Job that succeeded without a readable report, or
// whose report says it failed, is not recorded as good.
func (r *Reconciler) backupOutcome(ctx context.Context, c *dbv1.DatabaseCluster, job *batchv1.Job, at time.Time) (*dbv1.BackupStatus, error) {
	out := &dbv1.BackupStatus{Job: job.Name, FinishedAt: &metav1.Time{Time: at}}
	report, err := r.backupReport(ctx, job)
	if err != nil {
		return nil, err
	}
	switch {
	case report == nil && jobs.Finished(job, batchv1.JobComplete):
		out.Message = "the Job succeeded, but left no report to say what it stored; not counted as a backup"
	case report == nil:
		out.Message = "the Job failed with no report: " + jobs.Message(job, batchv1.JobFailed)
	case !report.Succeeded || !jobs.Finished(job, batchv1.JobComplete):
		out.Message = report.Message
		if out.Message == "" {
			out.Message = jobs.Message(job, batchv1.JobFailed)
		}
		if s3 := c.Spec.Backup.Destination.S3; s3 != nil && report.Step == backup.StepStore {
			out.Message = bucketFailure(s3, out.Message)
		}
	default:
		out.Succeeded = true
		out.Message = report.Message // a retention problem, if any
		out.Retained = int32(report.Kept)
		out.Snapshot = &dbv1.SnapshotStatus{
			Location:  report.Location,
			TakenAt:   metav1.NewTime(report.TakenAt),
			Revision:  report.Revision,
			Hash:      int64(report.Hash),
			TotalKeys: int64(report.TotalKeys),
			SizeBytes: report.SizeBytes,
		}
	}
	return out, nil
}

// bucketFailure says that writing to the bucket failed, naming the field to
// check first: what admission cannot know (the endpoint does not answer, the
// bucket does not exist, the keys are wrong) shows only when a backup runs.
func bucketFailure(s3 *dbv1.S3Bucket, msg string) string {
	return fmt.Sprintf("spec.backup.destination.s3.endpoint: could not write to bucket %q at %s; check the endpoint, the bucket and the keys in Secret %q: %s",
		s3.Bucket, s3.Endpoint, s3.CredentialsSecret.Name, msg)
}

// backupReport finds the backup container's report among the Job's pods:
// the newest pod whose container terminated with a parsable message. No
// report is (nil, nil); only API errors are errors.
func (r *Reconciler) backupReport(ctx context.Context, job *batchv1.Job) (*backup.Report, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("listing the pods of backup Job %s: %w", job.Name, err)
	}
	var found *backup.Report
	var foundAt time.Time
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != builders.BackupContainer || t == nil || t.Message == "" {
				continue
			}
			var rep backup.Report
			if err := json.Unmarshal([]byte(t.Message), &rep); err != nil {
				continue
			}
			if found == nil || t.FinishedAt.After(foundAt) {
				found, foundAt = &rep, t.FinishedAt.Time
			}
		}
	}
	return found, nil
}

// BackupJobCluster maps a backup Job (controlled by the CronJob, not the
// cluster) or its pod to its cluster, so that a finished backup wakes the
// controller.
func BackupJobCluster(o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[builders.LabelComponent] != builders.ComponentBackup || l[builders.LabelManagedBy] != builders.ManagerName || l[builders.LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: l[builders.LabelInstance]}}}
}
