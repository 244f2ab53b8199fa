package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// reconcileStatefulSet applies the members' StatefulSet and reads its pods.
func (r *Reconciler) reconcileStatefulSet(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := builders.StatefulSet(s.cluster, r.Builders)
	existing := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: s.cluster.Namespace}}
	changed, err := applyChild(ctx, r.Client, s.cluster, "StatefulSet", existing, desired, appsv1ac.ExtractStatefulSet)
	if err != nil {
		return s.childError(err)
	}
	if existing.ResourceVersion != "" { // it existed before this pass
		s.statefulSet = existing
	}
	s.statefulSetChanged = changed

	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.cluster.Namespace),
		client.MatchingLabels(builders.SelectorLabels(s.cluster))); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing member pods: %w", err)
	}
	s.pods = pods.Items
	return ctrl.Result{}, nil
}
