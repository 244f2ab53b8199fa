package engine

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// Every pod ready is not yet true while a StatefulSet of the namespace has
// pods to make: a recreated resource's new pods wait for the old ones, of
// the same names, to go, and the namespace has no pod at all in between.
func TestPodsNotMade(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithObjects(
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "zk"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "db"}},
	).Build()
	r := &run{e: &Engine{Client: c, operator: &scenario.OperatorSpec{}}, s: &scenario.Scenario{}, ns: "ns"}
	pod := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}

	missing, err := r.podsNotMade(t.Context(), &corev1.PodList{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(Equal("pod zk-0 of StatefulSet zk not made yet"))

	missing, err = r.podsNotMade(t.Context(), &corev1.PodList{Items: []corev1.Pod{pod("zk-0")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(Equal("pod zk-1 of StatefulSet zk not made yet"))

	missing, err = r.podsNotMade(t.Context(), &corev1.PodList{Items: []corev1.Pod{pod("zk-0"), pod("zk-1")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(BeEmpty())
}

// A wait that gives up names the expression that stopped it, and says
// whether it was false or could not be evaluated.
func TestUnmet(t *testing.T) {
	g := NewWithT(t)
	status := `{"state":"Ready"}`
	g.Expect(unmet(1, "self.status.ready == 3", nil, status)).To(Equal(`converged[1] "self.status.ready == 3" is false; status {"state":"Ready"}`))
	g.Expect(unmet(0, "self.status.ready == 3", errors.New("no such key: ready"), status)).To(
		Equal(`converged[0] "self.status.ready == 3" cannot be evaluated: no such key: ready; status {"state":"Ready"}`))
}
