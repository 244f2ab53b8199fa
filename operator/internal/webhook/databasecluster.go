// Package webhook guards DatabaseClusters at admission: what the schema and
// CEL rules cannot express, because it compares the old object with the new
// one in terms of etcd's quorum arithmetic, or needs a parser (cron) or the
// API server's own pod rules (container resources); and the CRD's own
// v1beta1 schema and CEL rules once more, because the API server checks a
// write against the schema of the version it was made in, and a v1alpha1
// object carries v1beta1's fields in an annotation its schema cannot see.
// It validates v1beta1; the API server converts v1alpha1 requests before
// they reach it.
package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
	"github.com/gauntlet-dev/gauntlet/operator/internal/validation"
)

// ValidatePath is where the manager serves the validating webhook; the
// generated ValidatingWebhookConfiguration points at it.
const ValidatePath = "/validate-database-gauntlet-dev-v1beta1-databasecluster"

// ConfigurationName is the name of the generated ValidatingWebhookConfiguration
// (before kustomize adds its prefix).
const ConfigurationName = "validating-webhook-configuration"

// Rules named in rejections, so that a user can look them up.
const (
	RuleQuorumSafeScaleDown = "quorum-safe scale-down"
)

// +kubebuilder:webhook:path=/validate-database-gauntlet-dev-v1beta1-databasecluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=database.gauntlet.dev,resources=databaseclusters,verbs=create;update,versions=v1beta1,name=vdatabasecluster.gauntlet.dev,admissionReviewVersions=v1

// Validator rejects DatabaseCluster changes that would break quorum and warns
// about sizes that add no fault tolerance.
type Validator struct{}

var _ admission.Validator[*dbv1.DatabaseCluster] = Validator{}

// SetupWithManager serves the validator and the conversion webhook (at
// /convert: v1alpha1 converts through the v1beta1 hub) from the manager's
// webhook server.
func SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &dbv1.DatabaseCluster{}).WithValidator(Validator{}).Complete()
}

// ValidateCreate refuses a spec the operator could not run and warns about
// even sizes.
func (Validator) ValidateCreate(ctx context.Context, c *dbv1.DatabaseCluster) (admission.Warnings, error) {
	if errs := validation.Change(ctx, c, nil); len(errs) > 0 {
		return nil, invalid(c, errs)
	}
	return sizeWarnings(c), nil
}

func invalid(c *dbv1.DatabaseCluster, errs field.ErrorList) error {
	return apierrors.NewInvalid(dbv1.GroupVersion.WithKind("DatabaseCluster").GroupKind(), c.Name, errs)
}

// ValidateUpdate refuses a spec the operator could not run and a scale-down
// that leaves fewer members than the quorum of the current size, and warns
// about even sizes. An object being deleted is not checked: its finalizer
// must always be removable.
func (Validator) ValidateUpdate(ctx context.Context, oldC, newC *dbv1.DatabaseCluster) (admission.Warnings, error) {
	if !newC.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	errs := validation.Change(ctx, newC, oldC)
	if err := quorumSafeScaleDown(oldC.DesiredReplicas(), newC.DesiredReplicas()); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, invalid(newC, errs)
	}
	return sizeWarnings(newC), nil
}

// ValidateDelete allows every deletion; the finalizer protects the data.
func (Validator) ValidateDelete(context.Context, *dbv1.DatabaseCluster) (admission.Warnings, error) {
	return nil, nil
}

// quorumSafeScaleDown: removing members one at a time keeps quorum only if
// the target size is at least the quorum of the current size; a larger jump
// would, for a moment, ask the remaining members to outvote a majority that
// no longer exists. 5→3 is allowed (quorum of 5 is 3), 5→2 is not.
func quorumSafeScaleDown(from, to int32) *field.Error {
	if to >= from {
		return nil
	}
	q := int32(etcd.Quorum(int(from)))
	if to >= q {
		return nil
	}
	return field.Forbidden(field.NewPath("spec", "replicas"), fmt.Sprintf(
		"%s: scaling down from %d to %d members would leave fewer than the quorum of the current size (%d of %d); scale down in steps of at most %d, to no fewer than %d members at a time",
		RuleQuorumSafeScaleDown, from, to, q, from, from-q, q))
}

func sizeWarnings(c *dbv1.DatabaseCluster) admission.Warnings {
	n := int(c.DesiredReplicas())
	if n == 0 || n%2 == 1 {
		return nil
	}
	return admission.Warnings{fmt.Sprintf(
		"spec.replicas: %d members tolerate %d failure(s), no more than %d members do; an even size adds a member without adding fault tolerance",
		n, etcd.FaultTolerance(n), n-1)}
}
