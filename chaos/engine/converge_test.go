package engine

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
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

// A wait ends at a condition, for the resource's generation, that names
// a field the run set that the operator may refuse; a condition of an
// older generation, or in a run that expects no refusal, does not end it.
func TestRefusedIn(t *testing.T) {
	g := NewWithT(t)
	s := &scenario.Scenario{Metadata: scenario.Metadata{Name: "explore-7"}}
	e := &Engine{}
	e.ExpectRefusal("explore-7", []string{"spec.resources.claims"})
	r := &run{e: e, s: s}
	obj := func(condGen int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "db", "generation": int64(3)},
			"status": map[string]any{"observedGeneration": int64(2), "conditions": []any{map[string]any{
				"type": "Progressing", "status": "False", "reason": "InvalidSpec", "observedGeneration": condGen,
				"message": "invalid DatabaseCluster spec: spec.resources.claims: Forbidden"}}},
		}}
	}
	g.Expect(r.refusedIn(obj(3))).To(Equal("Progressing condition (False): invalid DatabaseCluster spec: spec.resources.claims: Forbidden"))
	g.Expect(r.refusedIn(obj(2))).To(BeEmpty(), "it speaks of the generation before")
	r.s = &scenario.Scenario{Metadata: scenario.Metadata{Name: "leader-kill"}}
	g.Expect(r.refusedIn(obj(3))).To(BeEmpty(), "a run that expects no refusal")
}

// The first convergence waits for the operator to act on the resource:
// to write it (a status, a finalizer) or to make something that names it
// as owner. A resource as created, with nothing of it anywhere, has not
// converged, whatever its expressions and pods say.
func TestOperatorActed(t *testing.T) {
	g := NewWithT(t)
	db := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Database",
		"metadata": map[string]any{"name": "db", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}}
	kinds := map[schema.GroupVersionResource]string{}
	for _, gvr := range actedOn {
		kinds[gvr] = "List"
	}
	stranger := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "other", "namespace": "ns"}}}
	stranger.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Database", Name: "old", UID: "u0"}})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, stranger)
	r := &run{e: &Engine{Dynamic: dyn}, ns: "ns", obj: db, createdRV: "7"}

	owned, acted, err := r.operatorActed(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(acted).To(BeFalse(), "as created; the only object there is another resource's")
	g.Expect(owned).To(BeEmpty())

	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "db-a", "namespace": "ns"}}}
	pod.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Database", Name: "db", UID: "u1"}})
	_, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("ns").Create(t.Context(), pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	owned, acted, err = r.operatorActed(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(acted).To(BeTrue(), "a pod it owns, though nothing was written to it")
	g.Expect(owned).To(Equal([]string{"pods/db-a"}))

	r.e.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)
	_, acted, _ = r.operatorActed(t.Context())
	g.Expect(acted).To(BeFalse())
	r.obj.SetResourceVersion("9")
	owned, acted, _ = r.operatorActed(t.Context())
	g.Expect(acted).To(BeTrue(), "written since its creation: a status or a finalizer")
	g.Expect(owned).To(BeEmpty())
}

// The first convergence skips the quiet wait when the operator says it is
// done in a status the converged expressions read.
func TestStatusSpeaks(t *testing.T) {
	g := NewWithT(t)
	written := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"observedGeneration": int64(1)}}}
	none := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	for _, tc := range []struct {
		converged []string
		u         *unstructured.Unstructured
		want      bool
	}{
		{[]string{"self.status.observedGeneration == self.metadata.generation"}, written, true},
		{[]string{"self.status.observedGeneration == self.metadata.generation"}, none, false},
		{[]string{"true"}, written, false},
		{nil, written, false},
	} {
		r := &run{s: &scenario.Scenario{Spec: scenario.ScenarioSpec{Resource: scenario.Resource{Converged: tc.converged}}}}
		g.Expect(r.statusSpeaks(tc.u)).To(Equal(tc.want), "%v on %v", tc.converged, tc.u.Object)
	}
}

// A pod that is not ready says what its containers wait for.
func TestWaitingReasons(t *testing.T) {
	g := NewWithT(t)
	p := &corev1.Pod{Status: corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "config", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "redis", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}},
			{Name: "exporter", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}}}
	g.Expect(waitingReasons(p)).To(Equal(", redis waiting: ImagePullBackOff"))
	g.Expect(waitingReasons(&corev1.Pod{})).To(BeEmpty())
}
