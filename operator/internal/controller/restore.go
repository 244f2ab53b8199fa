package controller

import (
	"context"
	"fmt"
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
	src := c.Spec.RestoreFrom.Volume
	if src == nil { // validateSpec refuses any other source
		return ctrl.Result{}, nil
	}
	// The claim is named by the user and carries no label of ours, so the
	// cache cannot see it: read it from the API server.
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.reader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: src.ClaimName}, claim); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading the restore source claim %s: %w", src.ClaimName, err)
		}
		s.blocked = fmt.Errorf("spec.restoreFrom.volume.claimName: PersistentVolumeClaim %q does not exist in namespace %q; the restore starts when it does", src.ClaimName, c.Namespace)
		return s.requeueAfter(MissingReferenceRecheck)
	}
	names := s.bootstrapMembers
	for i, name := range names {
		if err := r.Client.Create(ctx, builders.MemberClaim(c, name)); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("creating the volume claim of %s: %w", name, err)
		}
		job := &batchv1.Job{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builders.RestoreJobName(c, i)}, job)
		progress := fmt.Sprintf("restoring member %s from pvc/%s/%s (%d of %d)", name, src.ClaimName, src.File, i+1, len(names))
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
			why := jobs.Message(job, batchv1.JobFailed)
			if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting the failed restore Job of %s: %w", name, err)
			}
			s.restoreErr = fmt.Errorf("restoring member %s from pvc/%s/%s failed (%s); retrying", name, src.ClaimName, src.File, why)
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
