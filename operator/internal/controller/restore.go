package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/jobs"
)

// RestorePollInterval checks on a restore Job, in case its watch event is missed.
const RestorePollInterval = 5 * time.Second

// MissingReferenceRecheck looks again for an object the spec names that does
// not exist yet (a restore claim, a StorageClass); nothing watches for it.
const MissingReferenceRecheck = 10 * time.Second

// restoreMembers fills every bootstrap member's volume from spec.restoreFrom
// before the StatefulSet first exists: it creates each member's claim (the
// StatefulSet adopts it by name) and runs one restore Job at a time (the
// snapshot claim is ReadWriteOnce). Until every Job has succeeded, the pass
// stops here and no member starts; a failed Job is reported in Degraded and
// retried. Once the StatefulSet exists the restore is over.
func (r *Reconciler) restoreMembers(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if c.Spec.RestoreFrom == nil || s.statefulSet != nil || s.bootstrapMembers == nil {
		return ctrl.Result{}, nil
	}
	from, blocked, err := r.restoreSource(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	if blocked != nil {
		s.blocked = blocked
		return s.requeueAfter(MissingReferenceRecheck)
	}
	names := s.bootstrapMembers
	for i, name := range names {
		if err := r.Client.Create(ctx, builders.MemberClaim(c, name)); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("creating the volume claim of %s: %w", name, err)
		}
		job := &batchv1.Job{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builders.RestoreJobName(c, i)}, job)
		progress := fmt.Sprintf("restoring member %s from %s (%d of %d)", name, from, i+1, len(names))
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Client.Create(ctx, builders.RestoreJob(c, i, names, r.Builders)); err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("creating the restore Job of %s: %w", name, err)
			}
			s.waitFor(dbv1.ReasonRestoring, progress)
			return s.requeueAfter(RestorePollInterval)
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("reading the restore Job of %s: %w", name, err)
		case jobs.Finished(job, batchv1.JobFailed):
			why := r.jobFailure(ctx, job)
			if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting the failed restore Job of %s: %w", name, err)
			}
			s.restoreErr = fmt.Errorf("restoring member %s from %s failed (%s); retrying", name, from, why)
			s.waitFor(dbv1.ReasonRestoring, progress)
			s.stop = true
			return ctrl.Result{}, s.restoreErr
		case !jobs.Finished(job, batchv1.JobComplete):
			s.waitFor(dbv1.ReasonRestoring, progress)
			return s.requeueAfter(RestorePollInterval)
		}
	}
	return ctrl.Result{}, nil
}

// restoreSource names spec.restoreFrom for messages, and says what the
// restore waits for when the source cannot be used yet: a claim or a
// credentials Secret that does not exist. The claim is named by the user and
// carries no label of ours, so the cache cannot see it: it is read from the
// API server.
func (r *Reconciler) restoreSource(ctx context.Context, c *dbv1.DatabaseCluster) (from string, blocked, err error) {
	src := c.Spec.RestoreFrom
	if s3 := src.S3; s3 != nil {
		from = "s3://" + s3.Bucket + "/" + s3.Prefix + s3.Key
		if r.Builders.BackupImage == "" {
			return from, errors.New("spec.restoreFrom.s3: the operator was started without a backup image (--backup-image), which downloads the backup"), nil
		}
		return from, r.checkCredentials(ctx, c, "spec.restoreFrom.s3.credentialsSecret", &s3.S3Bucket), nil
	}
	v := src.Volume
	from = fmt.Sprintf("pvc/%s/%s", v.ClaimName, v.File)
	err = r.reader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: v.ClaimName}, &corev1.PersistentVolumeClaim{})
	switch {
	case apierrors.IsNotFound(err):
		return from, fmt.Errorf("spec.restoreFrom.volume.claimName: PersistentVolumeClaim %q does not exist in namespace %q; the restore starts when it does", v.ClaimName, c.Namespace), nil
	case err != nil:
		return from, nil, fmt.Errorf("reading the restore source claim %s: %w", v.ClaimName, err)
	}
	return from, nil, nil
}

// jobFailure says why a Job failed: its condition, and what its containers
// left as termination messages when they exited with an error.
func (r *Reconciler) jobFailure(ctx context.Context, job *batchv1.Job) string {
	why := jobs.Message(job, batchv1.JobFailed)
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return why
	}
	for _, p := range pods.Items {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && t.Message != "" {
				return fmt.Sprintf("%s; %s: %s", why, cs.Name, strings.TrimSpace(t.Message))
			}
		}
	}
	return why
}
