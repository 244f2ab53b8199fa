package space

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Field is a leaf of the spec's schema that explore sets.
type Field struct {
	// Path is from the object's root: spec, then the properties.
	Path   []string
	Schema apiextensionsv1.JSONSchemaProps
}

func (f Field) String() string { return strings.Join(f.Path, ".") }

// Fields lists the spec's fields explore can set: the leaves (integers,
// numbers, booleans, strings), the maps whose values have a schema and
// the lists whose items do; it says of every other field why not.
func Fields(spec *apiextensionsv1.JSONSchemaProps) (fields []Field, skipped []string) {
	var walk func(path []string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path []string, s *apiextensionsv1.JSONSchemaProps) {
		name := strings.Join(path, ".")
		switch {
		case s.XIntOrString:
			fields = append(fields, Field{Path: path, Schema: *s})
		case s.Type == "object" && len(s.Properties) > 0:
			for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
				p := s.Properties[k]
				walk(append(slices.Clone(path), k), &p)
			}
		case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			fields = append(fields, Field{Path: path, Schema: *s})
		case s.Type == "object":
			skipped = append(skipped, name+" (an object whose keys have no schema)")
		case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
			fields = append(fields, Field{Path: path, Schema: *s})
		case s.Type == "array":
			skipped = append(skipped, name+" (a list whose items have no schema)")
		case s.Type == "integer", s.Type == "number", s.Type == "boolean", s.Type == "string":
			fields = append(fields, Field{Path: path, Schema: *s})
		default:
			skipped = append(skipped, fmt.Sprintf("%s (type %q)", name, s.Type))
		}
	}
	walk([]string{"spec"}, spec)
	return fields, skipped
}

// Step sets one field to a value: Path to Value, or, where the field's
// parents are missing, its first missing parent to an object built
// around it (Under), Leaf and LeafValue then naming the field and value
// it is for.
type Step struct {
	Path      []string `json:"path"`
	Value     any      `json:"value"`
	Leaf      []string `json:"leaf,omitempty"`
	LeafValue any      `json:"leafValue,omitempty"`
	// AtCreation sets the value in the resource as it is created rather
	// than as a change: a field its rules keep from changing.
	AtCreation bool `json:"atCreation,omitempty"`
	// Undo sets Path back to what the starting resource holds there (nil:
	// removes it), after a step that changed it.
	Undo bool `json:"undo,omitempty"`
	// Unset removes Path, which the starting resource sets and its schema
	// does not require (Value is nil: the merge patch's null).
	Unset bool `json:"unset,omitempty"`
	// Primary marks the value a field is tried with first (InRounds): a
	// quantity the resource holds, grown.
	Primary bool `json:"primary,omitempty"`
	// SwitchedOn are the switches (a.b.enabled below spec) the step turns
	// on beside its field, which waits for them (SwitchOn).
	SwitchedOn []string `json:"switchedOn,omitempty"`
	// Existing says Path is an object the starting resource holds, which
	// Value is merged into (a switch beside the field), not a new one.
	Existing bool `json:"existing,omitempty"`
}

// Removals are the steps that unset what the starting resource sets
// under spec and the schema does not require: each object and value at
// any depth (list items aside), outermost first. An operator that reads
// an optional field without checking it is there (a nil dereference, a
// default never applied) shows only when the field is gone, which no
// value of it can show.
func Removals(spec *apiextensionsv1.JSONSchemaProps, obj map[string]any) []Step {
	var out []Step
	var walk func(path []string, s *apiextensionsv1.JSONSchemaProps, v map[string]any)
	walk = func(path []string, s *apiextensionsv1.JSONSchemaProps, v map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(v)) {
			child, known := s.Properties[k]
			if !known {
				continue
			}
			p := append(slices.Clone(path), k)
			if !slices.Contains(s.Required, k) {
				out = append(out, Step{Path: p, Unset: true})
			}
			if m, ok := v[k].(map[string]any); ok && child.Type == "object" {
				walk(p, &child, m)
			}
		}
	}
	if m, ok := obj["spec"].(map[string]any); ok {
		walk([]string{"spec"}, spec, m)
	}
	return out
}

// UndoOf is the step that takes s back: Path as base (the starting
// resource) holds it, or removed when base has none. A value set at
// creation has nothing to go back to.
func UndoOf(s Step, base map[string]any) (Step, bool) {
	if s.AtCreation {
		return Step{}, false
	}
	var v any = base
	for _, p := range s.Path {
		m, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = m[p]
	}
	return Step{Path: s.Path, Value: undoValue(v, s.Value), Undo: true}, true
}

// undoValue is the merge patch that takes set back to was: was itself,
// with null for each key set added (at any depth), which was alone would
// leave in place.
func undoValue(was, set any) any {
	w, ok := was.(map[string]any)
	s, isMap := set.(map[string]any)
	if !ok || !isMap {
		return was
	}
	out := maps.Clone(w)
	for k, v := range s {
		if old, held := w[k]; held {
			out[k] = undoValue(old, v)
		} else {
			out[k] = nil
		}
	}
	return out
}

func (s Step) String() string {
	if s.Undo {
		return strings.Join(s.Path, ".") + " back as it was"
	}
	if s.Unset && s.AtCreation {
		return strings.Join(s.Path, ".") + " unset at creation"
	}
	if s.Unset {
		return strings.Join(s.Path, ".") + " unset"
	}
	path, v := s.Path, s.Value
	if s.Leaf != nil {
		path, v = s.Leaf, s.LeafValue
	}
	out := fmt.Sprintf("%s=%v", strings.Join(path, "."), v)
	switch v.(type) {
	case map[string]any, []any:
		b, _ := json.Marshal(v)
		out = fmt.Sprintf("%s=%s", strings.Join(path, "."), b)
	}
	if str, ok := v.(string); ok && len(str) > 24 {
		out = fmt.Sprintf("%s=%s…(%d characters)", strings.Join(path, "."), str[:8], len(str))
	}
	if s.Leaf != nil && !s.Existing {
		out += " (in a new " + strings.Join(s.Path, ".") + ")"
	}
	if len(s.SwitchedOn) > 0 {
		out += " with " + strings.Join(s.SwitchedOn, ", ") + " on"
	}
	if s.AtCreation {
		out += " at creation"
	}
	return out
}

// Field names the step's field.
func (s Step) Field() string {
	if s.Leaf != nil {
		return strings.Join(s.Leaf, ".")
	}
	return strings.Join(s.Path, ".")
}

// fieldPath is the path of the step's field (Field, unjoined).
func (s Step) fieldPath() []string {
	if s.Leaf != nil {
		return s.Leaf
	}
	return s.Path
}

// Patch is the step as a JSON merge patch of the object.
func (s Step) Patch() map[string]any {
	v := s.Value
	for i := len(s.Path) - 1; i > 0; i-- {
		v = map[string]any{s.Path[i]: v}
	}
	return map[string]any{s.Path[0]: v}
}

// Candidates are the values explore tries for f, current (the starting
// resource's value, nil when unset) left out: the bounds and their
// neighbours inside, every enum member, the default, the other boolean,
// a string at its length bound. Values the API server refuses are
// filtered later, by a dry run.
func Candidates(f Field, current any) []any {
	s := f.Schema
	var out []any
	add := func(v any) {
		if v == nil || fmt.Sprint(v) == fmt.Sprint(current) || slices.ContainsFunc(out, func(o any) bool { return fmt.Sprint(o) == fmt.Sprint(v) }) {
			return
		}
		out = append(out, v)
	}
	for _, e := range s.Enum {
		add(jsonValue(e.Raw))
	}
	if s.Default != nil {
		add(jsonValue(s.Default.Raw))
	}
	switch {
	case s.Type == "object":
		return mapCandidates(f, current)
	case s.Type == "array":
		return listCandidates(f, current)
	case s.XIntOrString:
		for _, v := range quantityCandidates(current) {
			add(v)
		}
	case s.Type == "boolean":
		add(current != true)
	case s.Type == "integer", s.Type == "number":
		lo, hi := bounds(s)
		for _, v := range []int64{lo, lo + 1, (lo + hi) / 2, hi - 1, hi} {
			if v >= lo && v <= hi {
				add(v)
			}
		}
	case s.Type == "string" && len(s.Enum) == 0:
		add(hintedString(strings.ToLower(f.Path[len(f.Path)-1])))
		add("explore")
		add("")
		if s.MaxLength != nil && *s.MaxLength > 0 && *s.MaxLength <= 4096 {
			add(strings.Repeat("a", int(*s.MaxLength)))
		}
	}
	return out
}

// quantityCandidates are an int-or-string field's values: where the
// resource holds a quantity with a unit (10Gi, 500m), that quantity grown
// (doubled), shrunk (halved) and emptied, the change an operator is
// asked for most first and the ones it must refuse, then the number 1, the
// field's integer form (an operator that writes back the whole object it
// read turns it into a string, a spec change of its own); else sizes, a
// number and a percentage.
func quantityCandidates(current any) []any {
	if !isQuantity(current) {
		return []any{"1Gi", "2Gi", "0", 1, "100%"}
	}
	q := resource.MustParse(current.(string))
	grown, shrunk := q.DeepCopy(), q.DeepCopy()
	grown.Add(q)
	shrunk.SetMilli(q.MilliValue() / 2)
	if q.Format == resource.BinarySI && q.Value()%2 == 0 {
		shrunk = *resource.NewQuantity(q.Value()/2, resource.BinarySI)
	}
	return []any{grown.String(), shrunk.String(), "0", 1}
}

// isQuantity says whether v is a positive quantity with a unit.
func isQuantity(v any) bool {
	str, ok := v.(string)
	q, err := resource.ParseQuantity(str)
	return ok && err == nil && q.Sign() > 0 && strings.TrimLeft(str, "0123456789.") != ""
}

// Steps are the steps that set f to each of its candidate values
// (Candidates), current being what the starting resource holds there:
// inside new parents where it lacks missing of them (Under), with the
// switches the field waits for on (SwitchOn, base being the starting
// resource). A quantity grown is the field's primary value.
func Steps(spec *apiextensionsv1.JSONSchemaProps, f Field, current any, missing int, base map[string]any) []Step {
	var out []Step
	for i, v := range Candidates(f, current) {
		st := SwitchOn(spec, Under(spec, Step{Path: f.Path, Value: v}, missing), base)
		st.Primary = i == 0 && f.Schema.XIntOrString && isQuantity(current)
		out = append(out, st)
	}
	return out
}

// bounds are an integer field's inclusive bounds: its schema's, else
// small numbers an operator plausibly acts on.
func bounds(s apiextensionsv1.JSONSchemaProps) (lo, hi int64) {
	lo, hi = 0, 10
	if s.Minimum != nil {
		lo = int64(math.Ceil(*s.Minimum))
		if s.ExclusiveMinimum {
			lo = int64(math.Floor(*s.Minimum)) + 1
		}
		if s.Maximum == nil {
			hi = lo + 10
		}
	}
	if s.Maximum != nil {
		hi = int64(math.Floor(*s.Maximum))
		if s.ExclusiveMaximum {
			hi = int64(math.Ceil(*s.Maximum)) - 1
		}
		if s.Minimum == nil {
			lo = hi - 10
		}
	}
	return lo, hi
}

// Shrink removes steps from a failing sequence, one at a time, as long as
// what is left still fails; it returns the shortest sequence found.
func Shrink(seq []Step, fails func([]Step) bool) []Step {
	for removed := true; removed && len(seq) > 1; {
		removed = false
		for i := range seq {
			shorter := slices.Delete(slices.Clone(seq), i, i+1)
			if fails(shorter) {
				seq, removed = shorter, true
				break
			}
		}
	}
	return seq
}

// jsonValue decodes a schema's enum member or default.
func jsonValue(raw []byte) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	if f, ok := v.(float64); ok && f == math.Trunc(f) {
		return int64(f)
	}
	return v
}

// Under sets a step's value inside the smallest object the API server
// can admit where the field's parents are missing from the resource:
// from the first missing parent down, every object holds its required
// properties, and one that requires none but has validation rules (such
// as "exactly one of a or b") its first property, each filled with a
// first value (Minimal). missing is how many of the path's last elements
// name objects the resource lacks, the field itself excluded.
func Under(spec *apiextensionsv1.JSONSchemaProps, s Step, missing int) Step {
	if missing <= 0 {
		return s
	}
	top := len(s.Path) - 1 - missing // the first missing parent's index in Path
	schemas := []*apiextensionsv1.JSONSchemaProps{spec}
	for _, name := range s.Path[1:] {
		p, ok := schemas[len(schemas)-1].Properties[name]
		if !ok {
			return s
		}
		schemas = append(schemas, &p)
	}
	v := s.Value
	for i := len(s.Path) - 2; i >= top; i-- {
		obj := minimalParent(schemas[i], s.Path[i+1])
		obj[s.Path[i+1]] = v
		v = obj
	}
	return Step{Path: s.Path[:top+1], Value: v, Leaf: s.Path, LeafValue: s.Value}
}

// minimalParent is the smallest object around a property child: its
// required properties, each Minimal. One with rules but no required
// property gets child alone (Minimal would add its first property,
// which a rule such as "exactly one of" refuses beside child).
func minimalParent(s *apiextensionsv1.JSONSchemaProps, child string) map[string]any {
	obj := map[string]any{}
	for _, n := range s.Required {
		if n != child {
			p := s.Properties[n]
			obj[n] = Minimal(n, &p)
		}
	}
	return obj
}

// Minimal is a first value for a field named name: its first enum member
// or its default; for an object, its required properties (or, when it
// requires none but has validation rules, its first property), each
// Minimal; for a string, a value its name suggests (an endpoint a URL, a
// schedule a cron line, an age or a period a duration), else "explore".
func Minimal(name string, s *apiextensionsv1.JSONSchemaProps) any {
	if len(s.Enum) > 0 {
		return jsonValue(s.Enum[0].Raw)
	}
	if s.Default != nil {
		return jsonValue(s.Default.Raw)
	}
	switch {
	case s.XIntOrString:
		return "1"
	case s.Type == "object" && len(s.Properties) > 0:
		obj := map[string]any{}
		names := s.Required
		if len(names) == 0 && len(s.XValidations) > 0 {
			names = slices.Sorted(maps.Keys(s.Properties))[:1]
		}
		for _, n := range names {
			p := s.Properties[n]
			obj[n] = Minimal(n, &p)
		}
		return obj
	case s.Type == "object":
		return map[string]any{}
	case s.Type == "array":
		return []any{}
	case s.Type == "boolean":
		return false
	case s.Type == "integer", s.Type == "number":
		lo, _ := bounds(*s)
		return lo
	}
	return hintedString(strings.ToLower(name))
}

// hintedString is a string a field of that (lowercased) name plausibly
// takes.
func hintedString(name string) string {
	switch {
	case strings.Contains(name, "endpoint"), strings.Contains(name, "url"):
		return "https://explore.example.com"
	case strings.Contains(name, "schedule"), strings.Contains(name, "cron"):
		return "0 * * * *"
	case strings.HasSuffix(name, "maxage"), strings.HasSuffix(name, "ttl"), strings.Contains(name, "period"),
		strings.Contains(name, "interval"), strings.Contains(name, "timeout"), strings.Contains(name, "duration"):
		return "1h"
	}
	return "explore"
}
