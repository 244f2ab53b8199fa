package compare

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// FollowMisses says, for each follow, what is wrong in st: "" when the
// child holds the spec field's value, "-" when the spec leaves the field
// unset (not judged).
func FollowMisses(follows []scenario.Follow, st *State) []string {
	out := make([]string, len(follows))
	for i, f := range follows {
		want, set := Flatten(map[string]any{"spec": st.Spec})[f.Field]
		if !set {
			out[i] = "-"
			continue
		}
		child, ok := st.Children[f.Object]
		if !ok {
			out[i] = fmt.Sprintf("%s=%s, but there is no %s", f.Field, Show(want), f.Object)
			continue
		}
		got, ok := Flatten(child)[f.Path]
		switch {
		case !ok:
			out[i] = fmt.Sprintf("%s=%s, but %s has no %s", f.Field, Show(want), f.Object, f.Path)
		case !SameValue(want, got):
			out[i] = fmt.Sprintf("%s=%s, but %s %s is %s", f.Field, Show(want), f.Object, f.Path, Show(got))
		}
	}
	return out
}

// Flatten lists a JSON-like value's scalar leaves by path: keys joined by
// dots, list items as [i].
func Flatten(v map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				walk(strings.TrimPrefix(path+"."+k, "."), x)
			}
		case []any:
			for i, x := range t {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		case nil:
		default:
			out[path] = t
		}
	}
	walk("", v)
	return out
}

// SameValue says whether a child's value carries a spec value: equal as
// text, as numbers, or as quantities (1Gi and 1024Mi, 0.5 and 500m).
func SameValue(want, got any) bool {
	if fmt.Sprint(want) == fmt.Sprint(got) {
		return true
	}
	if a, ok := number(want); ok {
		if b, ok := number(got); ok {
			return a == b
		}
	}
	a, aerr := resource.ParseQuantity(fmt.Sprint(want))
	b, berr := resource.ParseQuantity(fmt.Sprint(got))
	return aerr == nil && berr == nil && a.Cmp(b) == 0
}

func number(v any) (float64, bool) {
	switch t := v.(type) {
	case int64:
		return float64(t), true
	case int:
		return float64(t), true
	case float64:
		return t, !math.IsNaN(t)
	}
	return 0, false
}

// FollowLearner learns which children's fields carry which spec fields
// from resources created with different specs (the reference runs): a
// child field follows a spec field when, in at least two creations with
// different values of the spec field, it held that value, and no
// creation contradicts it.
type FollowLearner struct {
	creations []*State
}

// Observe adds a resource created with its spec, once converged.
func (l *FollowLearner) Observe(st *State) {
	if st != nil {
		l.creations = append(l.creations, st)
	}
}

// Follows are the follows learned for the spec fields named and the
// leaves under them (a map's keys, a list's items).
func (l *FollowLearner) Follows(fields []string) []scenario.Follow {
	type tally struct {
		values map[string]bool
		broken bool
	}
	seen := map[scenario.Follow]*tally{}
	for _, c := range l.creations {
		children := map[string]map[string]any{}
		for obj, child := range c.Children {
			children[obj] = Flatten(child)
		}
		for field, want := range Flatten(map[string]any{"spec": c.Spec}) {
			if !slices.ContainsFunc(fields, func(f string) bool { return under(field, f) }) {
				continue
			}
			for obj, leaves := range children {
				for p, got := range leaves {
					f := scenario.Follow{Field: field, Object: obj, Path: p}
					t := seen[f]
					if t == nil {
						t = &tally{values: map[string]bool{}}
						seen[f] = t
					}
					if SameValue(want, got) {
						t.values[fmt.Sprint(want)] = true
					} else {
						t.broken = true
					}
				}
			}
		}
	}
	var out []scenario.Follow
	for _, f := range slices.SortedFunc(maps.Keys(seen), compareFollows) {
		if t := seen[f]; !t.broken && len(t.values) >= 2 {
			out = append(out, f)
		}
	}
	return out
}

// under says whether path is field or a leaf under it.
func under(path, field string) bool {
	return path == field || strings.HasPrefix(path, field+".") || strings.HasPrefix(path, field+"[")
}

func compareFollows(a, b scenario.Follow) int {
	return strings.Compare(a.Field+"\x00"+a.Object+"\x00"+a.Path, b.Field+"\x00"+b.Object+"\x00"+b.Path)
}
