package controller

import (
	"context"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
)

// reconcileDisruptionBudget applies the PodDisruptionBudget that keeps a
// quorum of members through voluntary disruptions.
func (r *Reconciler) reconcileDisruptionBudget(ctx context.Context, s *scope) (ctrl.Result, error) {
	desired := builders.PodDisruptionBudget(s.cluster)
	existing := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: s.cluster.Namespace}}
	if _, err := applyChild(ctx, r.Client, &r.applied, s.cluster, "PodDisruptionBudget", existing, desired, policyv1ac.ExtractPodDisruptionBudget); err != nil {
		return s.childError(err)
	}
	return ctrl.Result{}, nil
}
