package controller

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/validation"
)

// validateSpec refuses a spec the builders cannot realise, by the same
// rules admission applies (validation.Cluster): anything that slipped past
// the API server is a terminal error shown in a condition, not a crash loop
// or a retry storm. A mistake under spec.backup stops only the backups
// (reconcileBackup shows it): the database runs on.
func (r *Reconciler) validateSpec(ctx context.Context, s *scope) (ctrl.Result, error) {
	var backupErrs, errs field.ErrorList
	for _, e := range r.validated.of(ctx, s.cluster) {
		if e.Field == "spec.backup" || strings.HasPrefix(e.Field, "spec.backup.") {
			backupErrs = append(backupErrs, e)
		} else {
			errs = append(errs, e)
		}
	}
	if len(backupErrs) > 0 {
		s.invalidBackup = backupErrs.ToAggregate()
	}
	if len(errs) > 0 {
		err := fmt.Errorf("%w: %w", validation.ErrInvalidSpec, append(errs, backupErrs...).ToAggregate())
		s.invalidSpec = err
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	return ctrl.Result{}, nil
}

// checkReferences waits, with a condition naming the field, for a
// StorageClass the spec names that does not exist: the members' claims would
// stay Pending with the reason only in their events. It looks only before the
// StatefulSet exists; storage cannot change afterwards.
func (r *Reconciler) checkReferences(ctx context.Context, s *scope) (ctrl.Result, error) {
	name := s.cluster.Spec.Storage.StorageClassName
	if name == nil || s.statefulSet != nil {
		return ctrl.Result{}, nil
	}
	err := r.reader().Get(ctx, client.ObjectKey{Name: *name}, &storagev1.StorageClass{})
	switch {
	case apierrors.IsNotFound(err):
		s.blocked = fmt.Errorf("spec.storage.storageClassName: StorageClass %q does not exist; members are created when it does", *name)
		return s.requeueAfter(MissingReferenceRecheck)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading StorageClass %s: %w", *name, err)
	}
	return ctrl.Result{}, nil
}

// reader reads past the cache.
func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// reconcileStatefulSet applies the members' StatefulSet at the size the
// membership calls for.
func (r *Reconciler) reconcileStatefulSet(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := builders.StatefulSet(s.cluster, s.replicas, r.Builders)
	existing := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: s.cluster.Namespace}}
	changed, err := applyChild(ctx, r.Client, &r.applied, s.cluster, "StatefulSet", existing, desired, appsv1ac.ExtractStatefulSet)
	if err != nil {
		return s.childError(err)
	}
	if existing.ResourceVersion != "" { // it existed before this pass
		s.statefulSet = existing
	}
	s.statefulSetChanged = changed
	return ctrl.Result{}, nil
}
