package scenario

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/invopop/jsonschema"
	. "github.com/onsi/gomega"
	jsonschemav6 "github.com/santhosh-tekuri/jsonschema/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
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

// TestReferenceFilesMatchTheSchemas: what Load accepts, the schemas accept.
func TestReferenceFilesMatchTheSchemas(t *testing.T) {
	compile := func(file string) *jsonschemav6.Schema {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschemav6.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschemav6.NewCompiler()
		if err := c.AddResource(file, doc); err != nil {
			t.Fatal(err)
		}
		return c.MustCompile(file)
	}
	scenarioSchema, operatorSchema := compile("scenario.schema.json"), compile("operator.schema.json")
	files := shippedFiles(t)
	n := 0
	for _, f := range files {
		y, err := os.ReadFile(f)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		if !bytes.Contains(y, []byte("apiVersion: "+APIVersion)) {
			continue // the resource manifests the scenarios create
		}
		n++
		t.Run(f, func(t *testing.T) {
			j, err := sigsyaml.YAMLToJSON(y)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			doc, err := jsonschemav6.UnmarshalJSON(bytes.NewReader(j))
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			s := scenarioSchema
			if filepath.Base(f) == "operator.yaml" {
				s = operatorSchema
			}
			if err := s.Validate(doc); err != nil {
				t.Fatal(err)
			}
		})
	}
	NewWithT(t).Expect(n).To(Equal(20), "the reference operator's 15 scenarios and Operator file, the example's 3 and its Operator file")
}

// shippedFiles are the scenario folders' files: the reference operator's
// and every example operator's.
func shippedFiles(t *testing.T) []string {
	var files []string
	for _, pattern := range []string{"../../suites/chaos/scenarios/*.yaml", "../../suites/examples/*/scenarios/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// TestShippedFoldersLoad: every scenario folder this repository ships
// passes the same checks gauntlet validate makes.
func TestShippedFoldersLoad(t *testing.T) {
	dirs := map[string]bool{}
	for _, f := range shippedFiles(t) {
		dirs[filepath.Dir(f)] = true
	}
	NewWithT(t).Expect(len(dirs)).To(BeNumerically(">=", 2))
	for dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			set, err := LoadPaths(dir)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(set.Scenarios).NotTo(BeEmpty())
		})
	}
}
