package space

import (
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The values of maps and lists: the keys a map plausibly holds, the items
// a list is given, and the replacement of a map's keys.

// Replacing is the step that follows s, when s sets a map's keys, to
// replace them with others (each old key null, as a merge patch removes
// it): an operator that copies a map into its children and never removes
// a key shows only on such a change, which no value set alone can show.
// A map of known keys (cpu and memory) trades one for another, and has
// no replacement when it holds them all; any other map gets a key of its
// own beside each.
func Replacing(s Step) (Step, bool) {
	if s.Unset || s.Undo || s.AtCreation {
		return Step{}, false
	}
	path, v := s.Path, s.Value
	if s.Leaf != nil {
		path, v = s.Leaf, s.LeafValue
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return Step{}, false
	}
	known := mapKeys(strings.ToLower(path[len(path)-1]))
	next := map[string]any{}
	for k, val := range m {
		if val == nil {
			return Step{}, false // a step that clears the map
		}
		next[k] = nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		other := k + "-2"
		if len(known) > 1 {
			i := slices.IndexFunc(known, func(c string) bool { _, taken := next[c]; return !taken })
			if i < 0 {
				return Step{}, false
			}
			other = known[i]
		}
		next[other] = keyValue(other, m[k])
	}
	return Step{Path: path, Value: next}, true
}

// keyValue is the value a replacing key takes: a quantity that suits a
// resource name, else the value of the key it replaces.
func keyValue(key string, was any) any {
	switch key {
	case "cpu":
		return "100m"
	case "memory":
		return "64Mi"
	}
	return was
}

// mapCandidates are a map's values: cleared (each key it has set to
// null, as a merge patch removes them), then a key its name suggests
// (cpu and memory for limits and requests) with a value for that key,
// each such key alone and all together.
func mapCandidates(f Field, current any) []any {
	var out []any
	if cur, ok := current.(map[string]any); ok && len(cur) > 0 {
		cleared := map[string]any{}
		for k := range cur {
			cleared[k] = nil
		}
		out = append(out, cleared)
	}
	elem := f.Schema.AdditionalProperties.Schema
	all := map[string]any{}
	keys := mapKeys(strings.ToLower(f.Path[len(f.Path)-1]))
	for _, k := range keys {
		v := elementValue(k, elem)
		all[k] = v
		out = append(out, map[string]any{k: v})
	}
	if len(keys) > 1 {
		out = append(out, all)
	}
	return out
}

// mapKeys are the keys a map of that (lowercased) name plausibly holds.
func mapKeys(name string) []string {
	switch {
	case strings.Contains(name, "limit"), strings.Contains(name, "request"):
		return []string{"cpu", "memory"}
	case strings.Contains(name, "label"), strings.Contains(name, "annotation"), strings.Contains(name, "selector"):
		return []string{"gauntlet.dev/explore"}
	}
	return []string{"explore"}
}

// elementValue is a value for a map's key: a quantity that suits the key
// where the values are quantities, else Minimal.
func elementValue(key string, s *apiextensionsv1.JSONSchemaProps) any {
	if s.XIntOrString {
		return keyValue(key, "1")
	}
	return Minimal(key, s)
}

// listCandidates are a list's values (a merge patch replaces a list
// whole): empty, and one item built whole (Minimal); two items where
// the list may hold more than one.
func listCandidates(f Field, current any) []any {
	item := f.Schema.Items.Schema
	name := strings.TrimSuffix(strings.ToLower(f.Path[len(f.Path)-1]), "s")
	one := Minimal(name, item)
	out := []any{[]any{one}}
	if cur, ok := current.([]any); ok && len(cur) > 0 {
		out = []any{[]any{}, []any{one}}
	}
	if f.Schema.MaxItems == nil || *f.Schema.MaxItems >= 2 {
		second := Minimal(name, item)
		if m, ok := second.(map[string]any); ok {
			// a second item differs in its string properties, which
			// list-map keys usually are
			for k, v := range m {
				if str, ok := v.(string); ok {
					m[k] = str + "-2"
				}
			}
		} else if str, ok := second.(string); ok {
			second = str + "-2"
		}
		out = append(out, []any{one, second})
	}
	return out
}
