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
