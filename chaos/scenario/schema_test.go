package scenario

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "rewrite the JSON Schemas from the Go types")

// schemaFor reflects a kind into a strict schema (every field without
// omitempty required, no other property allowed), described by the Go
// doc comments.
func schemaFor(t *testing.T, v any, id string) []byte {
	t.Helper()
	r := &jsonschema.Reflector{Mapper: func(ty reflect.Type) *jsonschema.Schema {
		if ty == reflect.TypeFor[metav1.Duration]() {
			return &jsonschema.Schema{Type: "string", Pattern: `^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`, Description: "a Go duration such as 30s or 2m"}
		}
		return nil
	}}
	if err := r.AddGoComments("github.com/gauntlet-dev/gauntlet/chaos/scenario", "."); err != nil {
		t.Fatalf("reading the doc comments: %v", err)
	}
	s := r.Reflect(v)
	s.ID = jsonschema.ID(id)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestSchemasMatchTheGoTypes keeps the checked-in JSON Schemas (for editors
// and other tools; Load itself checks more than a schema can say) equal to
// what the Go types generate: go test ./chaos/scenario -update rewrites them.
func TestSchemasMatchTheGoTypes(t *testing.T) {
	for file, v := range map[string]any{
		"scenario.schema.json": &Scenario{},
		"operator.schema.json": &Operator{},
	} {
		t.Run(file, func(t *testing.T) {
			want := schemaFor(t, v, "https://gauntlet.dev/schemas/"+file)
			if *update {
				if err := os.WriteFile(file, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(file)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(string(got)).To(Equal(string(want)), "%s is stale: run go test ./chaos/scenario -update and commit it", file)
		})
	}
}

// TestFilesMatchTheSchemas: what Load accepts, the schemas accept: the
// reference files and those only preflight refuses.
func TestFilesMatchTheSchemas(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*.yaml")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, f := range files {
		if strings.HasPrefix(f, filepath.Join("testdata", "invalid")) {
			continue
		}
		y, err := os.ReadFile(f)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		ours, err := MatchDocument(y)
		if !ours && err == nil {
			continue // the resource manifests the scenarios create
		}
		n++
		t.Run(f, func(t *testing.T) {
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			if _, errs := LoadFile(f); errs != nil {
				t.Fatalf("Load refuses it: %v", errs)
			}
		})
	}
	NewWithT(t).Expect(n).To(Equal(6), "the reference's 3 scenarios and Operator file, preflight's scenario and Operator file")
}

// TestMatchSchemaRefuses: a field the types lack, and a kind with no
// schema, are refused with where; a document of another API is not ours.
func TestMatchSchemaRefuses(t *testing.T) {
	g := NewWithT(t)
	err := MatchSchema(KindScenario, []byte("apiVersion: gauntlet.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nspec: {faultt: {}}\n"))
	g.Expect(err).To(MatchError(ContainSubstring("faultt")))
	g.Expect(MatchSchema("Cluster", nil)).To(MatchError(ContainSubstring(`no schema for kind "Cluster"`)))

	ours, err := MatchDocument([]byte("apiVersion: gauntlet.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nspec: {faultt: {}}\n"))
	g.Expect(ours).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("faultt")))
	ours, err = MatchDocument([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	g.Expect(ours).To(BeFalse(), "a manifest a scenario creates is not checked")
	g.Expect(err).NotTo(HaveOccurred())
}
