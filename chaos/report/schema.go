// The JSON Schema of report.json. It is generated from the Go types
// (go test ./chaos/report -update) and checked in as report.schema.json; a
// test fails when the two drift apart.

package report

import (
	"bytes"
	_ "embed"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaID is the schema's $id.
const SchemaID = "https://gauntlet.dev/schemas/chaos-report-v1alpha1.json"

// Schema is report.schema.json.
//
//go:embed report.schema.json
var Schema []byte

var compiled = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		panic(fmt.Sprintf("report: report.schema.json: %v", err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		panic(fmt.Sprintf("report: %v", err))
	}
	return c.MustCompile(SchemaID)
}()

// Validate checks a report.json document against the schema; the error
// names every place that does not conform.
func Validate(data []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := compiled.Validate(doc); err != nil {
		return fmt.Errorf("report does not match schema %s: %w", SchemaID, err)
	}
	return nil
}
