package space

import (
	"encoding/json"
	"fmt"
	"maps"
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

// Enables says whether a boolean so named is its object's switch: enabled
// or enable, the convention of Helm values and of the CRDs written after
// them.
func Enables(name string) bool {
	n := strings.ToLower(name)
	return n == "enabled" || n == "enable"
}

// SwitchOn turns on, with s, each switch its field waits for: in every
// object above the field (below spec), a boolean that Enables by its
// name, unset or false in base (the starting resource). While its switch
// is off a setting rightly does nothing, and no oracle can tell what it
// should have done; with the switch on it is tried where it matters. A
// field that is itself a switch, an undo or a removal is left as it is.
func SwitchOn(spec *apiextensionsv1.JSONSchemaProps, s Step, base map[string]any) Step {
	if s.Undo || s.Unset {
		return s
	}
	leaf := s.fieldPath()
	var off [][]string
	sch := spec
	for i := 1; i < len(leaf)-1; i++ {
		p, ok := sch.Properties[leaf[i]]
		if !ok {
			return s
		}
		sch = &p
		for _, name := range slices.Sorted(maps.Keys(sch.Properties)) {
			sw := append(slices.Clone(leaf[:i+1]), name)
			if !Enables(name) || sch.Properties[name].Type != "boolean" || slices.Equal(sw, leaf) {
				continue
			}
			if on, _, _ := unstructured.NestedBool(base, sw...); !on {
				off = append(off, sw)
			}
		}
	}
	if len(off) == 0 {
		return s
	}
	out := s
	if top := off[0][:len(off[0])-1]; len(top) < len(s.Path) {
		// The object holding the switch is the resource's: the step
		// moves up to it, its value merged in beside the switch.
		out = Step{Path: top, Value: nested(s.Path[len(top):], s.Value), Leaf: leaf, LeafValue: s.Value, Existing: true, AtCreation: s.AtCreation}
		if s.Leaf != nil {
			out.LeafValue = s.LeafValue
		}
	}
	for _, sw := range off {
		v, ok := setIn(out.Value, sw[len(out.Path):])
		if !ok {
			return s
		}
		out.Value = v
		out.SwitchedOn = append(out.SwitchedOn, strings.Join(sw, "."))
	}
	return out
}

// nested is v under the keys of path, outermost first.
func nested(path []string, v any) any {
	for i := len(path) - 1; i >= 0; i-- {
		v = map[string]any{path[i]: v}
	}
	return v
}

// setIn is a copy of v with true at path, the maps on the way copied; ok
// is false where one of them is not a map.
func setIn(v any, path []string) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, false
	}
	m = maps.Clone(m)
	if len(path) == 1 {
		m[path[0]] = true
		return m, true
	}
	sub, ok := setIn(m[path[0]], path[1:])
	m[path[0]] = sub
	return m, ok
}
