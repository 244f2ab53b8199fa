package relay

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The relay's pod holds no credentials and passes the restricted Pod
// Security Standard, whatever the operator's namespace enforces.
func TestRelayDeployment(t *testing.T) {
	g := NewWithT(t)
	d := deployment("op-system", "registry.example/api-relay:v1")
	g.Expect(d.Namespace).To(Equal("op-system"))
	g.Expect(d.Name).To(Equal(Name))
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(1))
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(d.Spec.Template.Labels))
	pod := d.Spec.Template.Spec
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse(), "no API credentials")
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.Image).To(Equal("registry.example/api-relay:v1"))
	g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
	g.Expect(c.Args).To(Equal([]string{"--listen=:8443", "--tunnels=:9443"}))
	g.Expect(c.Ports).To(ConsistOf(
		corev1.ContainerPort{Name: "api", ContainerPort: 8443, Protocol: corev1.ProtocolTCP},
		corev1.ContainerPort{Name: "tunnels", ContainerPort: 9443, Protocol: corev1.ProtocolTCP}))
	g.Expect(c.ReadinessProbe.TCPSocket.Port).To(Equal(intstr.FromString("tunnels")))
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
}

// The operator's pods are rewired to the relay's Service on 443, as they
// reach the API server's own.
func TestRelayService(t *testing.T) {
	g := NewWithT(t)
	s := service("op-system")
	g.Expect(s.Namespace).To(Equal("op-system"))
	g.Expect(s.Spec.Selector).To(Equal(deployment("op-system", "x").Spec.Template.Labels))
	g.Expect(s.Spec.Ports).To(Equal([]corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("api")}}))
}
