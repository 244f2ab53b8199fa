package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Event reasons and actions of the delete path.
const (
	EventSnapshotTaken  = "SnapshotTaken"
	EventSnapshotFailed = "SnapshotFailed"
	actionSnapshot      = "FinalSnapshot"
)

// errNoSnapshotter is what a Snapshot deletion reports when the manager was
// started without a snapshot implementation.
var errNoSnapshotter = errors.New("no snapshotter is configured: the final snapshot cannot be taken; set spec.deletionPolicy to Delete to delete without one")

// ensureFinalizer adds the finalizer before any child exists, so that no
// deletion can skip the delete path. The pass that adds it ends there, as
// cluster-api's controllers do: it has observed nothing worth a status
// write, and the finalizer's own update event (FinalizerAdded) starts the
// pass that creates the children, on a cache that already holds it. The
// creating pass, the longest of a cluster's life, is one API round trip
// shorter for it.
func (r *Reconciler) ensureFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	if controllerutil.ContainsFinalizer(s.cluster, dbv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	base := s.cluster.DeepCopy()
	controllerutil.AddFinalizer(s.cluster, dbv1.Finalizer)
	err := r.Client.Patch(ctx, s.cluster, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsNotFound(err):
		s.stop = true // deleted meanwhile: nothing left to do
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
	}
	s.stop, s.finalizerPass = true, true
	return ctrl.Result{}, nil
}

// reconcileDelete carries out the deletion policy, then releases the
// finalizer so that garbage collection removes the children.
//
// With Snapshot, the finalizer goes only after a verified snapshot taken since
// deletion began is recorded in status.lastSnapshot: the pass that gets the
// snapshot records it (status is written at the end of the pass), and the next
// pass, seeing it recorded, removes the finalizer. A failed snapshot keeps the
// finalizer, shows in Degraded and an event, and is retried with the
// workqueue's backoff.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if !controllerutil.ContainsFinalizer(c, dbv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if c.Spec.DeletionPolicy != dbv1.DeletionPolicyDelete && !finalSnapshotRecorded(c) {
		if r.Snapshotter == nil {
			return r.snapshotFailed(s, errNoSnapshotter)
		}
		snap, err := r.Snapshotter.FinalSnapshot(ctx, c)
		switch {
		case err != nil:
			return r.snapshotFailed(s, err)
		case snap == nil:
			return s.requeueAfter(SnapshotPollInterval)
		}
		snap.Final = true
		c.Status.LastSnapshot = snap
		r.event(c, corev1.EventTypeNormal, EventSnapshotTaken, actionSnapshot,
			"final snapshot verified at %s (revision %d, %d keys)", snap.Location, snap.Revision, snap.TotalKeys)
		// Record it first; the next pass removes the finalizer.
		return ctrl.Result{RequeueAfter: SnapshotRecordedRequeue}, nil
	}

	return r.removeFinalizer(ctx, c)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, c *dbv1.DatabaseCluster) (ctrl.Result, error) {
	base := c.DeepCopy()
	controllerutil.RemoveFinalizer(c, dbv1.Finalizer)
	if err := r.Client.Patch(ctx, c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	r.Metrics.Forget(c.Namespace, c.Name)
	return ctrl.Result{}, nil
}

func (r *Reconciler) snapshotFailed(s *scope, err error) (ctrl.Result, error) {
	s.snapshotErr = err
	r.event(s.cluster, corev1.EventTypeWarning, EventSnapshotFailed, actionSnapshot,
		"final snapshot failed, keeping the finalizer and retrying: %v", err)
	return ctrl.Result{}, fmt.Errorf("final snapshot: %w", err)
}

// finalSnapshotRecorded is true when status holds the snapshot taken for
// this deletion. It is marked, not compared by time: the operator's clock and
// the API server's deletionTimestamp need not agree (the simulation tier
// found a snapshot loop when the operator's clock lagged).
func finalSnapshotRecorded(c *dbv1.DatabaseCluster) bool {
	snap := c.Status.LastSnapshot
	return c.DeletionTimestamp != nil && snap != nil && snap.Final
}
