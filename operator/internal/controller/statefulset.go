package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/validation"
)

// validateSpec refuses a spec the builders cannot realise. The schema and CEL
// rules reject such specs at the API server; anything that slips through is a
// terminal error shown in a condition, not a crash loop or a retry storm.
func (r *Reconciler) validateSpec(_ context.Context, s *scope) (ctrl.Result, error) {
	err := builders.Validate(s.cluster)
	if err == nil {
		if errs := validation.Spec(s.cluster); len(errs) > 0 {
			err = fmt.Errorf("%w: %w", builders.ErrInvalidSpec, errs.ToAggregate())
		}
	}
	if err != nil {
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
	if bug(BugHotLoop) {
		desired.Spec.Template.WithAnnotations(map[string]string{"gauntlet.dev/reconciled-at": r.now().Format("15:04:05.000")})
	}
	existing := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: s.cluster.Namespace}}
	changed, err := applyChild(ctx, r.Client, &r.applied, s.cluster, "StatefulSet", existing, desired, appsv1ac.ExtractStatefulSet)
	if err != nil {
		return s.childError(err)
	}
	previousImage := ""
	if len(existing.Spec.Template.Spec.Containers) > 0 {
		previousImage = existing.Spec.Template.Spec.Containers[0].Image
	}
	if existing.ResourceVersion != "" { // it existed before this pass
		s.statefulSet = existing
	}
	s.statefulSetChanged = changed
	if bug(BugImpatientRoll) && changed && previousImage != "" && previousImage != s.cluster.Spec.Image {
		// Wrong on purpose: restarts every member at once.
		for i := range s.pods {
			if err := r.Client.Delete(ctx, &s.pods[i]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, nil
}

// bugEarlyStatus is BugStatusBeforeChildWrite: it writes a status that
// claims the current generation is reconciled before the StatefulSet is.
func (r *Reconciler) bugEarlyStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !bug(BugStatusBeforeChildWrite) {
		return ctrl.Result{}, nil
	}
	base := s.cluster.DeepCopy()
	s.cluster.Status.ObservedGeneration = s.cluster.Generation
	meta.SetStatusCondition(&s.cluster.Status.Conditions, metav1.Condition{
		Type: dbv1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: dbv1.ReasonReconciled,
		Message:            fmt.Sprintf("%s, as the spec asks", countMembers(int(s.cluster.DesiredReplicas()))),
		ObservedGeneration: s.cluster.Generation, LastTransitionTime: metav1.NewTime(r.now()),
	})
	if equality.Semantic.DeepEqual(base.Status, s.cluster.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Client.Status().Patch(ctx, s.cluster, client.MergeFrom(base))
}
