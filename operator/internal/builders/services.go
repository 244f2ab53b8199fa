package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// HeadlessService governs the StatefulSet: it gives every member a stable DNS
// name, published before the member is ready so that peers can find each
// other while the cluster bootstraps.
func HeadlessService(c *dbv1.DatabaseCluster) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(HeadlessServiceName(c), c.Namespace).
		WithLabels(Labels(c)).
		WithOwnerReferences(ownerReference(c)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithClusterIP(corev1.ClusterIPNone).
			WithPublishNotReadyAddresses(true).
			WithSelector(SelectorLabels(c)).
			WithPorts(
				servicePort(ClientPortName, ClientPort),
				servicePort(PeerPortName, PeerPort),
			))
}

// ClientService load-balances clients over ready members only.
func ClientService(c *dbv1.DatabaseCluster) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(ClientServiceName(c), c.Namespace).
		WithLabels(Labels(c)).
		WithOwnerReferences(ownerReference(c)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(SelectorLabels(c)).
			WithPorts(servicePort(ClientPortName, ClientPort)))
}

// servicePort sets protocol and targetPort explicitly: they are defaulted by
// the API server otherwise, and a defaulted key field would make the applied
// configuration differ from the desired one on every pass.
func servicePort(name string, port int32) *corev1ac.ServicePortApplyConfiguration {
	return corev1ac.ServicePort().
		WithName(name).
		WithProtocol(corev1.ProtocolTCP).
		WithPort(port).
		WithTargetPort(intstr.FromString(name))
}
