package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// A spec's validation is kept for its generation: the same generation
// gets the same answer without validating again (here, a spec changed
// behind the generation's back still gets the first answer), a new
// generation or a new object is validated afresh, and an object never
// stored (generation 0) every time.
func TestValidatedSpecsKeepAnAnswerPerGeneration(t *testing.T) {
	g := NewWithT(t)
	c := &dbv1.DatabaseCluster{}
	c.APIVersion, c.Kind = dbv1.GroupVersion.String(), "DatabaseCluster"
	c.Name, c.Namespace, c.UID, c.Generation = "db", "ns", "uid-1", 1
	c.Spec.Replicas = ptr.To[int32](3)
	c.Spec.Image = "gauntlet.dev/etcd:v3.6.16"
	c.Spec.Storage.Size = resource.MustParse("1Gi")
	var v validatedSpecs
	g.Expect(v.of(t.Context(), c)).To(BeEmpty())

	c.Spec.Replicas = ptr.To[int32](20) // over the CRD's bound of 9
	g.Expect(v.of(t.Context(), c)).To(BeEmpty(), "generation 1 was answered already")
	c.Generation = 2
	g.Expect(v.of(t.Context(), c)).To(ContainElement(HaveField("Field", "spec.replicas")))

	c.Spec.Replicas = ptr.To[int32](3)
	c.UID = "uid-2" // deleted and created again under the same name
	g.Expect(v.of(t.Context(), c)).To(BeEmpty())

	c.Spec.Replicas, c.Generation = ptr.To[int32](20), 0
	g.Expect(v.of(t.Context(), c)).NotTo(BeEmpty(), "never stored: validated every time")
	c.Spec.Replicas = ptr.To[int32](3)
	g.Expect(v.of(t.Context(), c)).To(BeEmpty())

	v.forget(types.NamespacedName{Namespace: "ns", Name: "db"})
	g.Expect(v.entries).To(BeEmpty())
}
