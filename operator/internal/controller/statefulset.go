package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
)

// validateSpec refuses a spec the builders cannot realise. The schema and CEL
// rules reject such specs at the API server; anything that slips through is a
// terminal error shown in a condition, not a crash loop or a retry storm.
func (r *Reconciler) validateSpec(_ context.Context, s *scope) (ctrl.Result, error) {
	if err := builders.Validate(s.cluster); err != nil {
		s.invalidSpec = err
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	return ctrl.Result{}, nil
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
