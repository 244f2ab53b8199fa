package controller

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
)

// reconcileServices applies the headless Service that gives members stable
// names and the client Service.
func (r *Reconciler) reconcileServices(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, desired := range []*corev1ac.ServiceApplyConfiguration{
		builders.HeadlessService(s.cluster),
		builders.ClientService(s.cluster),
	} {
		existing := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: s.cluster.Namespace}}
		if _, err := applyChild(ctx, r.Client, &r.applied, s.cluster, "Service", existing, desired, corev1ac.ExtractService); err != nil {
			return s.childError(err)
		}
	}
	return ctrl.Result{}, nil
}

// childError turns a foreign child into a blocked pass (a condition and a
// slow retry, not an error backoff); other errors go back to the workqueue.
func (s *scope) childError(err error) (ctrl.Result, error) {
	if fc := (*ForeignChildError)(nil); errors.As(err, &fc) {
		s.foreignChild = fc
		return s.requeueAfter(ForeignChildRecheckInterval)
	}
	return ctrl.Result{}, err
}
