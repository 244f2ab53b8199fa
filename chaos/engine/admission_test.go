package engine

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

func TestPodSecurityLevel(t *testing.T) {
	cases := []struct{ operator, scenario, want string }{
		{"", "", "restricted"},
		{"baseline", "", "baseline"},
		{"baseline", "privileged", "privileged"},
		{"", "baseline", "baseline"},
	}
	for _, tc := range cases {
		r := &run{e: &Engine{operator: &scenario.OperatorSpec{PodSecurity: tc.operator}},
			s: &scenario.Scenario{Spec: scenario.ScenarioSpec{PodSecurity: tc.scenario}}}
		NewWithT(t).Expect(r.namespaceLabels()).To(Equal(map[string]string{
			"pod-security.kubernetes.io/enforce": tc.want, "pod-security.kubernetes.io/warn": tc.want}), "operator %q scenario %q", tc.operator, tc.scenario)
	}
}

// A controller's FailedCreate event that carries admission's refusal fails
// the wait for convergence at once; other warnings do not.
func TestAdmissionRefusal(t *testing.T) {
	g := NewWithT(t)
	event := func(name, reason, msg string) client.Object {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Reason: reason, Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Name: "zk"}}
	}
	c := fake.NewClientBuilder().WithObjects(
		event("a", "FailedScheduling", "0/1 nodes are available"),
		event("b", "FailedCreate", "create Pod zk-0 in StatefulSet zk failed error: Internal error occurred"),
	).Build()
	r := &run{e: &Engine{Client: c, operator: &scenario.OperatorSpec{}}, s: &scenario.Scenario{}, ns: "ns"}
	refused, err := r.admissionRefusal(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refused).To(BeEmpty())

	g.Expect(c.Create(t.Context(), event("c", "FailedCreate",
		`create Pod zk-0 in StatefulSet zk failed error: pods "zk-0" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`))).To(Succeed())
	refused, err = r.admissionRefusal(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refused).To(And(
		HavePrefix("admission refused what StatefulSet zk creates: "),
		ContainSubstring(`violates PodSecurity "restricted:latest": runAsNonRoot != true`),
		ContainSubstring(`enforces Pod Security level "restricted"; spec.podSecurity`)))
}
