package framework

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// GarbageCollector plays Kubernetes' garbage collector for backends that run
// none (envtest, the fake client): each Step deletes objects of the listed
// kinds whose controller owner no longer exists (or was replaced by a new
// object with another UID). Children of deleted children go on a later Step,
// as with background propagation.
type GarbageCollector struct {
	Client client.Client
	// Kinds are the dependents to collect, for example &appsv1.StatefulSetList{}.
	Kinds []client.ObjectList
}

// Step deletes orphaned dependents and reports whether it deleted any.
func (gc *GarbageCollector) Step(ctx context.Context) (bool, error) {
	changed := false
	var errs []error
	for _, proto := range gc.Kinds {
		list := proto.DeepCopyObject().(client.ObjectList)
		if err := gc.Client.List(ctx, list); err != nil {
			return changed, fmt.Errorf("gc: listing %T: %w", list, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return changed, err
		}
		for _, item := range items {
			obj := item.(client.Object)
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
	}
	return changed, errors.Join(errs...)
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
