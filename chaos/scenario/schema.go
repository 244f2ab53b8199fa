// The JSON Schemas of the Scenario and Operator files, for editors and
// other tools (Load itself checks more than a schema can say). They are
// generated from the Go types (go test ./chaos/scenario -update) and
// checked in; a test fails when the two drift apart.

package scenario

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// schemaBase is where the schemas' $id place them.
const schemaBase = "https://gauntlet.dev/schemas/"

// The schemas' files, as gauntlet schema prints them.
var (
	//go:embed scenario.schema.json
	ScenarioSchema []byte
	//go:embed operator.schema.json
	OperatorSchema []byte
)

var compiledSchemas = sync.OnceValue(func() map[string]*jsonschema.Schema {
	out := map[string]*jsonschema.Schema{}
	for kind, b := range map[string][]byte{KindScenario: ScenarioSchema, KindOperator: OperatorSchema} {
		id := schemaBase + strings.ToLower(kind) + ".schema.json"
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			panic(fmt.Sprintf("scenario: the %s schema: %v", kind, err))
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(id, doc); err != nil {
			panic(fmt.Sprintf("scenario: %v", err))
		}
		out[kind] = c.MustCompile(id)
	}
	return out
})

// MatchSchema checks one YAML document of kind Scenario or Operator
// against its schema; the error names every place that does not conform.
func MatchSchema(kind string, data []byte) error {
	s, ok := compiledSchemas()[kind]
	if !ok {
		return fmt.Errorf("no schema for kind %q (%s or %s)", kind, KindScenario, KindOperator)
	}
	j, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%s does not match its schema: %w", kind, err)
	}
	return nil
}

// MatchDocument reads one YAML document's apiVersion and kind: a Gauntlet
// document (APIVersion) is checked against its kind's schema, and ours
// says it was one; any other (a resource manifest a scenario creates) is
// left alone.
func MatchDocument(data []byte) (ours bool, err error) {
	var head metav1.TypeMeta
	if err := sigsyaml.Unmarshal(data, &head); err != nil {
		return false, err
	}
	if head.APIVersion != APIVersion {
		return false, nil
	}
	return true, MatchSchema(head.Kind, data)
}
