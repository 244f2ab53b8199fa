package engine

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// The relay's pod holds no credentials and passes the restricted Pod
// Security Standard, whatever the operator's namespace enforces.
func TestRelayDeployment(t *testing.T) {
	g := NewWithT(t)
	d := relayDeployment("op-system", "registry.example/api-relay:v1")
	g.Expect(d.Namespace).To(Equal("op-system"))
	g.Expect(d.Name).To(Equal(relayName))
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
	s := relayService("op-system")
	g.Expect(s.Namespace).To(Equal("op-system"))
	g.Expect(s.Spec.Selector).To(Equal(relayDeployment("op-system", "x").Spec.Template.Labels))
	g.Expect(s.Spec.Ports).To(Equal([]corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("api")}}))
}

// The relay is the way to the proxy on an existing cluster whose pods'
// route to this machine was not given, or when asked for; never for a set
// without view faults.
func TestViaRelay(t *testing.T) {
	g := NewWithT(t)
	view := &scenario.Set{Scenarios: []*scenario.Scenario{{Spec: scenario.ScenarioSpec{Fault: scenario.Fault{Action: scenario.ViewActions[0]}}}}}
	infra := &scenario.Set{Scenarios: []*scenario.Scenario{{Spec: scenario.ScenarioSpec{Fault: scenario.Fault{Action: "pod-kill"}}}}}
	via := func(set *scenario.Set, c cluster.Options, r RelayOptions) bool {
		return (&Engine{o: Options{Set: set, Cluster: c, Relay: r}}).viaRelay()
	}
	g.Expect(via(view, cluster.Options{}, RelayOptions{})).To(BeFalse(), "kind made here: its gateway")
	g.Expect(via(view, cluster.Options{}, RelayOptions{Always: true})).To(BeTrue())
	g.Expect(via(view, cluster.Options{Existing: true}, RelayOptions{})).To(BeTrue())
	g.Expect(via(view, cluster.Options{Existing: true, HostAddress: "10.0.0.1"}, RelayOptions{})).To(BeFalse())
	g.Expect(via(infra, cluster.Options{Existing: true}, RelayOptions{Always: true})).To(BeFalse())
}
