package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownerDepth bounds the chain of controller references walked up from a
// pod: a Deployment's pods are two steps from it, a CronJob's three, and
// a resource that owns either one step more.
const ownerDepth = 5

// ownedPods are the running pods of the namespace whose chain of
// controller references leads to the resource under test (an owned role).
func (r *resolution) ownedPods(ctx context.Context) ([]string, error) {
	if r.owner == nil {
		return nil, fmt.Errorf("an owned role needs the resource under test, and there is none yet")
	}
	list := &corev1.PodList{}
	if err := r.e.Client.List(ctx, list, client.InNamespace(r.namespace)); err != nil {
		return nil, err
	}
	leads := map[types.UID]bool{r.owner.GetUID(): true}
	var names []string
	for i := range list.Items {
		p := &list.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		ok, err := r.leadsToOwner(ctx, p, leads)
		if err != nil {
			return nil, fmt.Errorf("following the owners of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if ok {
			names = append(names, p.Name)
		}
	}
	return names, nil
}

// leadsToOwner walks obj's controller references up to ownerDepth steps
// and says whether they reach the owner. known holds each UID already
// judged (the owner's true), and learns those of this walk.
func (r *resolution) leadsToOwner(ctx context.Context, obj metav1.Object, known map[types.UID]bool) (bool, error) {
	var walked []types.UID
	result := false
	for range ownerDepth {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil {
			break
		}
		if v, ok := known[ref.UID]; ok {
			result = v
			break
		}
		walked = append(walked, ref.UID)
		parent := &metav1.PartialObjectMetadata{}
		parent.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		if err := r.e.Client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: ref.Name}, parent); err != nil {
			if apierrors.IsNotFound(err) {
				break // gone: its pods are on their way out
			}
			return false, err
		}
		obj = parent
	}
	for _, uid := range walked {
		known[uid] = result
	}
	return result, nil
}
