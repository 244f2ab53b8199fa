package memcached

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDServesTheAPI checks the generated CRD (make manifests) against the
// Go types: a cluster that installs it serves GroupVersion's Memcached, with
// the status subresource the reconciler writes through.
func TestCRDServesTheAPI(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile("config/crd/cache.example.com_memcacheds.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.UnmarshalStrict(b, crd)).To(Succeed())

	g.Expect(crd.Spec.Group).To(Equal(GroupVersion.Group))
	g.Expect(crd.Spec.Names.Kind).To(Equal("Memcached"))
	g.Expect(crd.Spec.Scope).To(Equal(apiextensionsv1.NamespaceScoped))
	g.Expect(crd.Spec.Versions).To(HaveLen(1))
	v := crd.Spec.Versions[0]
	g.Expect(v.Name).To(Equal(GroupVersion.Version), "the version the cluster serves")
	g.Expect(v.Served).To(BeTrue())
	g.Expect(v.Storage).To(BeTrue())
	g.Expect(v.Subresources).NotTo(BeNil())
	g.Expect(v.Subresources.Status).NotTo(BeNil(), "the reconciler writes status through the subresource")
	size := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"]
	g.Expect(*size.Minimum).To(BeEquivalentTo(1))
	g.Expect(*size.Maximum).To(BeEquivalentTo(5))
	image := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["image"]
	g.Expect(*image.MinLength).To(BeEquivalentTo(1), "an empty image is refused at admission, not left to fail the Deployment's write")
}
