package explore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// HasField says whether the spec's schema has the field at path.
func HasField(spec *apiextensionsv1.JSONSchemaProps, path []string) bool {
	s := spec
	for _, name := range path {
		p, ok := s.Properties[name]
		if !ok {
			return false
		}
		s = &p
	}
	return true
}

// WithSteps is a copy of obj with the steps' values set, as a merge patch
// of each sets them.
func WithSteps(obj *unstructured.Unstructured, steps []Step) (*unstructured.Unstructured, error) {
	doc, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		patch, err := json.Marshal(st.Patch())
		if err != nil {
			return nil, err
		}
		if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
			return nil, fmt.Errorf("setting %s: %w", st, err)
		}
	}
	out := &unstructured.Unstructured{}
	return out, out.UnmarshalJSON(doc)
}

// Switches are the spec's booleans that are off unless set (no default
// true), by path below spec (a.b, list items' fields under the list's
// name): the switches of features whose other settings wait for them.
func Switches(spec *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	var walk func(path []string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path []string, s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		if s.Type == "boolean" && len(path) > 0 && (s.Default == nil || string(s.Default.Raw) != "true") {
			out = append(out, strings.Join(path, "."))
		}
		for name, p := range s.Properties {
			walk(append(slices.Clone(path), name), &p)
		}
		if s.Items != nil {
			walk(path, s.Items.Schema)
		}
	}
	walk(nil, spec)
	slices.Sort(out)
	return out
}
