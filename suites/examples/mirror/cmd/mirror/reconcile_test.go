package main

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// One pass makes the copies the Mirror asks for, updates a stale one,
// deletes one past the count, and reports what it found.
func TestReconcile(t *testing.T) {
	g := NewWithT(t)
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.gauntlet.dev/v1", "kind": "Mirror",
		"metadata": map[string]any{"name": "s", "namespace": "ns", "uid": "u1", "generation": int64(2)},
		"spec":     map[string]any{"copies": int64(2), "data": map[string]any{"k": "v"}},
	}}
	owned := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{labelMirror: "s"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.gauntlet.dev/v1", Kind: "Mirror", Name: "s", UID: "u1", Controller: ptr.To(true)}}},
			Data: data}
	}
	stale, extra := owned("s-1", map[string]string{"k": "old"}), owned("s-2", map[string]string{"k": "v"})
	cs := fake.NewClientset(stale, extra)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{mirrors: "MirrorList"}, m)
	r := &reconciler{cs: cs, dyn: dyn,
		mirrors:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		configMaps: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	g.Expect(r.mirrors.Add(m)).To(Succeed())
	g.Expect(r.configMaps.Add(stale)).To(Succeed())
	g.Expect(r.configMaps.Add(extra)).To(Succeed())

	g.Expect(r.reconcile(t.Context(), "ns/s")).To(Succeed())
	cms, err := cs.CoreV1().ConfigMaps("ns").List(t.Context(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cms.Items).To(ConsistOf(
		And(HaveField("Name", "s-0"), HaveField("Data", map[string]string{"k": "v"})),
		And(HaveField("Name", "s-1"), HaveField("Data", map[string]string{"k": "v"}))))
	got, err := dyn.Resource(mirrors).Namespace("ns").Get(t.Context(), "s", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	g.Expect(conds).To(ConsistOf(And(HaveKeyWithValue("status", "False"), HaveKeyWithValue("message", "0 of 2 copies hold the data"))),
		"neither copy held the data when the pass read them")
	gen, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
	g.Expect(gen).To(BeEquivalentTo(2))
}
