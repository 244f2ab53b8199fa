// Package endstate compares what two runs left behind: the end states the
// simulation's differential oracle and the chaos engine's twin and fresh
// comparisons judge. An end state is a set of objects, each a JSON-like
// value (maps, lists, strings, numbers) already normalised by its caller,
// keyed by what names the object ("StatefulSet/db"). The comparison is
// go-cmp's, reported path by path so that a report can say where two runs
// first parted.
//
// It owns how two end states are compared. It must not know how one is
// captured or normalised: that is the caller's (the fake client's objects
// in the simulation, the live namespace in the chaos engine).
package endstate

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// Difference is one place where end state b differs from a: the path
// ("StatefulSet/db.spec.replicas", "status.members[1].leader") and each
// side's value in a few words, "absent" where a side has none.
type Difference struct {
	Path string
	A, B string
}

// The values Objects gives an object only one side holds.
const (
	Absent  = "absent"
	Present = "present"
	Missing = "missing"
	Leaked  = "present (leaked)"
)

// Objects lists where end state b differs from a: the objects a holds
// and b lacks (present, missing), then for each object of b in name
// order, either that a lacks it (absent, present (leaked)) or its fields
// that differ.
func Objects(a, b map[string]map[string]any) []Difference {
	var out []Difference
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if _, ok := b[k]; !ok {
			out = append(out, Difference{Path: k, A: Present, B: Missing})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		ak, ok := a[k]
		if !ok {
			out = append(out, Difference{Path: k, A: Absent, B: Leaked})
			continue
		}
		out = append(out, Values(k, ak, b[k])...)
	}
	return out
}

// Values lists where b differs from a, path by path under prefix: each
// leaf go-cmp finds unequal, with map keys as ".key" and list items as
// "[i]" (an item only one side holds is absent on the other).
func Values(prefix string, a, b any) []Difference {
	r := &reporter{prefix: prefix}
	cmp.Equal(a, b, cmp.Reporter(r))
	return r.diffs
}

// reporter collects go-cmp's unequal leaves as Differences.
type reporter struct {
	prefix string
	steps  cmp.Path
	diffs  []Difference
}

func (r *reporter) PushStep(s cmp.PathStep) { r.steps = append(r.steps, s) }

func (r *reporter) PopStep() { r.steps = r.steps[:len(r.steps)-1] }

func (r *reporter) Report(res cmp.Result) {
	if res.Equal() {
		return
	}
	a, b := r.steps.Last().Values()
	r.diffs = append(r.diffs, Difference{Path: r.path(), A: Show(a), B: Show(b)})
}

// path renders the steps from the root: ".key" for a map key, "[i]" for a
// list item (the index on the side that holds it); type assertions and
// the root step add nothing.
func (r *reporter) path() string {
	var b strings.Builder
	b.WriteString(r.prefix)
	for _, s := range r.steps {
		switch s := s.(type) {
		case cmp.MapIndex:
			if b.Len() > 0 {
				b.WriteString(".")
			}
			fmt.Fprint(&b, s.Key().Interface())
		case cmp.SliceIndex:
			i, j := s.SplitKeys()
			if i < 0 {
				i = j
			}
			fmt.Fprintf(&b, "[%d]", i)
		}
	}
	return b.String()
}

// Show is a value in a few words: "absent" for none, else its JSON cut
// to 200 bytes, written as it is (no HTML escapes).
func Show(v reflect.Value) string {
	if !v.IsValid() || (v.Kind() == reflect.Interface && v.IsNil()) {
		return Absent
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.Interface()); err != nil {
		return fmt.Sprint(v.Interface())
	}
	s := strings.TrimSpace(buf.String())
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
