package validation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func cluster(mutate func(*dbv1.DatabaseCluster)) *dbv1.DatabaseCluster {
	c := &dbv1.DatabaseCluster{}
	c.APIVersion, c.Kind = dbv1.GroupVersion.String(), "DatabaseCluster"
	c.Name, c.Namespace = "db", "default"
	c.Spec.Replicas = ptr.To[int32](3)
	c.Spec.Image = "gauntlet.dev/etcd:v3.6.16"
	c.Spec.Storage.Size = resource.MustParse("1Gi")
	if mutate != nil {
		mutate(c)
	}
	return c
}

// TestClusterSchemaAppliesTheCRDsOwnRules: the rules written as markers on
// the API types reach the controller through the generated CRD, with the
// field path and the bound the API server would report.
func TestClusterSchemaAppliesTheCRDsOwnRules(t *testing.T) {
	s, err := ClusterSchema("v1beta1")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name   string
		mutate func(*dbv1.DatabaseCluster)
		want   []string // substrings of the one error; none: valid
	}{
		{name: "valid", mutate: nil},
		{name: "nine members", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](9) }},
		{name: "no replicas", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = nil }, want: []string{"spec.replicas", "Required"}},
		{name: "zero replicas", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](0) }, want: []string{"spec.replicas", "greater than or equal to 1"}},
		{name: "ten replicas", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](10) }, want: []string{"spec.replicas", "less than or equal to 9"}},
		{name: "no image", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Image = "" }, want: []string{"spec.image"}},
		{name: "image with a space", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Image = "etcd v3" }, want: []string{"spec.image", "whitespace"}},
		{name: "zero storage", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Storage.Size = resource.MustParse("0") }, want: []string{"spec.storage.size"}},
		{name: "negative storage", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.Storage.Size = resource.MustParse("-1Gi") }, want: []string{"spec.storage.size"}},
		{name: "unknown deletion policy", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.DeletionPolicy = "Keep" }, want: []string{"spec.deletionPolicy", `"Keep"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := s.Validate(t.Context(), cluster(tc.mutate), nil)
			if len(tc.want) == 0 {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			for _, w := range tc.want {
				g.Expect(errs[0].Error()).To(ContainSubstring(w))
			}
		})
	}
}

// TestClusterSchemaTransitionRules: CEL rules on oldSelf hold on update.
func TestClusterSchemaTransitionRules(t *testing.T) {
	g := NewWithT(t)
	s, err := ClusterSchema("v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	old := cluster(nil)
	grown := cluster(func(c *dbv1.DatabaseCluster) { c.Spec.Storage.Size = resource.MustParse("2Gi") })
	errs := s.Validate(t.Context(), grown, old)
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Error()).To(And(ContainSubstring("spec.storage"), ContainSubstring("storage is immutable")))
	g.Expect(s.Validate(t.Context(), grown, nil)).To(BeEmpty(), "without a stored object no transition rule applies")
}

// TestClusterSchemaAdmitsEverySample: every sample in fixtures/samples, in
// the version it is written in.
func TestClusterSchemaAdmitsEverySample(t *testing.T) {
	files, err := filepath.Glob("../../../fixtures/samples/*.yaml")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(files).NotTo(BeEmpty())
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			data, err := os.ReadFile(f)
			g.Expect(err).NotTo(HaveOccurred())
			for _, doc := range strings.Split(string(data), "\n---") {
				u := &unstructured.Unstructured{}
				g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
				if len(u.Object) == 0 || u.GetKind() != "DatabaseCluster" {
					continue
				}
				_, version, _ := strings.Cut(u.GetAPIVersion(), "/")
				s, err := ClusterSchema(version)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(s.Validate(t.Context(), u, nil)).To(BeEmpty())
			}
		})
	}
	_, err = ClusterSchema("v2")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`no version "v2"`)))
}

// BenchmarkCluster is what validation adds to every reconcile.
func BenchmarkCluster(b *testing.B) {
	c := cluster(nil)
	for b.Loop() {
		if errs := Cluster(b.Context(), c); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
