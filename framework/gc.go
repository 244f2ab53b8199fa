package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GarbageCollector plays Kubernetes' garbage collector for backends that run
// none (envtest, the fake client): each Step deletes objects of the listed
// kinds whose controller owner no longer exists (or was replaced by a new
// object with another UID), and ends the deletions the API server leaves to
// the collector (an owner deleted with propagation Orphan or Foreground).
// Children of deleted children go on a later Step, as with background
// propagation.
type GarbageCollector struct {
	Client client.Client
	// Kinds are the dependents to collect, for example &appsv1.StatefulSetList{}.
	Kinds []client.ObjectList
}

// Step deletes orphaned dependents, ends the deletions waiting on the
// collector, and reports whether it changed anything.
func (gc *GarbageCollector) Step(ctx context.Context) (bool, error) {
	objs, err := gc.list(ctx)
	if err != nil {
		return false, err
	}
	changed := false
	var errs []error
	for _, obj := range objs {
		c, err := gc.finish(ctx, obj, objs)
		changed = changed || c
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, obj := range objs {
		ref := metav1.GetControllerOf(obj)
		if ref == nil || !obj.GetDeletionTimestamp().IsZero() {
			continue
		}
		gone, err := gc.ownerGone(ctx, obj.GetNamespace(), ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !gone {
			continue
		}
		if err := gc.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("gc: deleting %s: %w", obj.GetName(), err))
			continue
		}
		changed = true
	}
	return changed, errors.Join(errs...)
}

// list is every object of the kinds.
func (gc *GarbageCollector) list(ctx context.Context) ([]client.Object, error) {
	var objs []client.Object
	for _, proto := range gc.Kinds {
		list := proto.DeepCopyObject().(client.ObjectList)
		if err := gc.Client.List(ctx, list); err != nil {
			return nil, fmt.Errorf("gc: listing %T: %w", list, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			objs = append(objs, item.(client.Object))
		}
	}
	return objs, nil
}

// finish ends an owner's deletion that waits on the collector, as the
// API server's finalizers ask: "orphan" (propagation Orphan) once its
// dependents no longer name it as their owner, "foregroundDeletion" once
// they are gone.
func (gc *GarbageCollector) finish(ctx context.Context, owner client.Object, objs []client.Object) (bool, error) {
	if owner.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	fins := owner.GetFinalizers()
	orphan, foreground := slices.Contains(fins, metav1.FinalizerOrphanDependents), slices.Contains(fins, metav1.FinalizerDeleteDependents)
	if !orphan && !foreground {
		return false, nil
	}
	var left int
	for _, dep := range objs {
		if !ownedBy(dep, owner.GetUID()) {
			continue
		}
		var err error
		switch {
		case orphan:
			base := dep.DeepCopyObject().(client.Object)
			dep.SetOwnerReferences(slices.DeleteFunc(dep.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == owner.GetUID() }))
			err = gc.Client.Patch(ctx, dep, client.MergeFrom(base))
		case dep.GetDeletionTimestamp().IsZero():
			left++
			err = gc.Client.Delete(ctx, dep, client.PropagationPolicy(metav1.DeletePropagationBackground))
		default:
			left++
		}
		if client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("gc: %s's dependent %s: %w", owner.GetName(), dep.GetName(), err)
		}
	}
	if left > 0 {
		return true, nil
	}
	base := owner.DeepCopyObject().(client.Object)
	owner.SetFinalizers(slices.DeleteFunc(slices.Clone(fins), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	}))
	if err := gc.Client.Patch(ctx, owner, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("gc: ending %s's deletion: %w", owner.GetName(), err)
	}
	return true, nil
}

// ownedBy says whether obj names uid among its owners.
func ownedBy(obj client.Object, uid types.UID) bool {
	return slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == uid })
}

func (gc *GarbageCollector) ownerGone(ctx context.Context, namespace string, ref *metav1.OwnerReference) (bool, error) {
	owner := &unstructured.Unstructured{}
	owner.SetAPIVersion(ref.APIVersion)
	owner.SetKind(ref.Kind)
	err := gc.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, owner)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("gc: reading owner %s %s: %w", ref.Kind, ref.Name, err)
	default:
		return owner.GetUID() != ref.UID, nil
	}
}
