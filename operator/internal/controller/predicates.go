package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// StatefulSetReadinessChanged lets an owned StatefulSet's update through when
// its generation changed (its spec was written) or when one of the status
// fields the DatabaseCluster's status is computed from changed: ready,
// available, updated and current replicas, and the current and update
// revisions. Creates and deletes always pass.
//
// GenerationChangedPredicate alone, as scaffolds suggest, drops every
// status-only update: pods become ready, the StatefulSet controller raises
// readyReplicas, and the DatabaseCluster never hears of it, so its status
// stays stale until some unrelated event. Passing every update instead wakes
// the controller on each heartbeat-like status write. This is the middle.
func StatefulSetReadinessChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldSet, okOld := e.ObjectOld.(*appsv1.StatefulSet)
			newSet, okNew := e.ObjectNew.(*appsv1.StatefulSet)
			if !okOld || !okNew {
				return true
			}
			return oldSet.Generation != newSet.Generation || readinessChanged(oldSet.Status, newSet.Status)
		},
	}
}

func readinessChanged(a, b appsv1.StatefulSetStatus) bool {
	return a.ObservedGeneration != b.ObservedGeneration ||
		a.Replicas != b.Replicas ||
		a.ReadyReplicas != b.ReadyReplicas ||
		a.AvailableReplicas != b.AvailableReplicas ||
		a.UpdatedReplicas != b.UpdatedReplicas ||
		a.CurrentReplicas != b.CurrentReplicas ||
		a.CurrentRevision != b.CurrentRevision ||
		a.UpdateRevision != b.UpdateRevision
}

// ClusterChanged says which DatabaseCluster events start a pass: a spec
// change (a new generation), the start of deletion, and the arrival of the
// finalizer, which starts the pass that creates the children. Status writes,
// the controller's own, start none.
func ClusterChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, DeletionStarted(), FinalizerAdded())
}

// DeletionStarted lets an update through when it sets the deletion timestamp,
// so that the delete path runs even if the generation did not move.
func DeletionStarted() predicate.Predicate {
	return updatesWhere(func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	})
}

// FinalizerAdded lets an update through when it adds the operator's
// finalizer: the pass that adds it ends there, and this event starts the
// pass that creates the children, on a cache that holds the finalizer.
func FinalizerAdded() predicate.Predicate {
	return updatesWhere(func(e event.UpdateEvent) bool {
		return !controllerutil.ContainsFinalizer(e.ObjectOld, dbv1.Finalizer) && controllerutil.ContainsFinalizer(e.ObjectNew, dbv1.Finalizer)
	})
}

// updatesWhere passes the updates f accepts and no create, delete or
// generic event (predicate.Funcs passes those when their func is unset).
func updatesWhere(f func(event.UpdateEvent) bool) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  f,
	}
}
