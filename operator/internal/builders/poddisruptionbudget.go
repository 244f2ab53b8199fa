package builders

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// PodDisruptionBudget keeps a quorum of members through voluntary disruptions
// such as node drains: minAvailable is the quorum of spec.replicas, so a
// drain never evicts the member whose loss would stop the database.
func PodDisruptionBudget(c *dbv1.DatabaseCluster) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(PodDisruptionBudgetName(c), c.Namespace).
		WithLabels(Labels(c)).
		WithOwnerReferences(ownerReference(c)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMinAvailable(intstr.FromInt32(int32(etcd.Quorum(int(c.DesiredReplicas()))))).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c))))
}
