package install

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestListKind(t *testing.T) {
	g := NewWithT(t)
	crds, err := CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]bool{}
	for _, crd := range crds {
		gvk := listKind(crd)
		g.Expect(gvk.Group).To(Equal("chaos-mesh.org"))
		g.Expect(gvk.Version).To(Equal("v1alpha1"))
		g.Expect(gvk.Kind).To(HaveSuffix("List"))
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		kinds[kind] = true
	}
	g.Expect(listKind(find(t, crds, "CustomResourceDefinition", "podchaos.chaos-mesh.org"))).
		To(Equal(schema.GroupVersionKind{Group: "chaos-mesh.org", Version: "v1alpha1", Kind: "PodChaosList"}))
	// Every per-pod kind Uninstall holds back is a real kind.
	for k := range internalKinds {
		g.Expect(kinds).To(HaveKey(k))
	}
}

// TestGroupForUninstall: every rendered object lands in exactly one of
// Uninstall's delete steps, and the CRDs split into the kinds users create
// and the per-pod kinds removed after them.
func TestGroupForUninstall(t *testing.T) {
	g := NewWithT(t)
	objs, _ := mustRender(t, Options{})

	got := groupForUninstall(objs)

	all := [][]*unstructured.Unstructured{got.crds, got.webhookConfigs, got.workloads, got.others, got.namespace}
	n := 0
	for _, group := range all {
		n += len(group)
	}
	g.Expect(n).To(Equal(len(objs)))
	g.Expect(got.namespace).To(HaveLen(1))
	for _, u := range got.webhookConfigs {
		g.Expect(u.GetKind()).To(HaveSuffix("WebhookConfiguration"))
	}
	for _, u := range got.workloads {
		g.Expect(u.GetKind()).To(BeElementOf("Deployment", "DaemonSet"))
	}
	g.Expect(append(append([]*unstructured.Unstructured{}, got.topLevel...), got.perPod...)).To(ConsistOf(got.crds))
	g.Expect(got.perPod).To(HaveLen(len(internalKinds)))
	for _, crd := range got.perPod {
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		g.Expect(internalKinds).To(HaveKey(kind))
	}
}
