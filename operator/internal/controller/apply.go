package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// ForeignChildError says that an object the cluster needs exists and is
// controlled by something else.
type ForeignChildError struct {
	Kind string
	Name string
}

func (e *ForeignChildError) Error() string {
	return fmt.Sprintf("%s %q exists and is not controlled by this DatabaseCluster; the operator will neither adopt nor overwrite it: delete or rename it", e.Kind, e.Name)
}

// applyChild writes the desired state of one child with server-side apply,
// under FieldOwner with forced ownership, unless the fields this operator
// owns on the existing object already hold exactly the desired values: then it
// writes nothing, so a converged pass leaves every resourceVersion unchanged
// (and makes no API call). existing is filled from the API; extract returns
// the configuration FieldOwner has applied to it.
//
// A child that exists but is controlled by another owner is never touched:
// applyChild returns a *ForeignChildError.
func applyChild[T client.Object, A runtime.ApplyConfiguration](
	ctx context.Context, c client.Client, owner *dbv1.DatabaseCluster, kind string,
	existing T, desired A, extract func(T, string) (A, error),
) (changed bool, err error) {
	key := client.ObjectKeyFromObject(existing)
	switch err := c.Get(ctx, key, existing); {
	case apierrors.IsNotFound(err):
		// Create it below.
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", kind, err)
	case !metav1.IsControlledBy(existing, owner):
		return false, &ForeignChildError{Kind: kind, Name: key.Name}
	default:
		applied, err := extract(existing, FieldOwner)
		if err != nil {
			return false, fmt.Errorf("extracting applied %s: %w", kind, err)
		}
		if equality.Semantic.DeepEqual(applied, desired) {
			return false, nil
		}
	}
	if err := c.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %s: %w", kind, err)
	}
	return true, nil
}
