package engine

import (
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// followGrace is how long after a convergence a child may take to carry
// a spec field's value: an operator may report converged a moment before
// its last write lands.
const followGrace = 10 * time.Second

// followSeen is what the consistency oracle saw of one follow.
type followSeen struct {
	judged    int
	violation string
}

// followsAt judges the scenario's follows once converged, at moment (a
// converge action, or the end): each child field holds its spec field's
// value within followGrace. The first miss of each follow is kept.
func (r *run) followsAt(ctx context.Context, moment string) {
	follows := r.s.Spec.Assertions.Follows
	if len(follows) == 0 {
		return
	}
	if r.follows == nil {
		r.follows = make([]followSeen, len(follows))
	}
	var misses []string
	err := framework.PollFor(ctx, "the children to carry the spec's values", followGrace, time.Second, func(ctx context.Context) (bool, string, error) {
		st, err := compare.Capture(ctx, r.e.Dynamic, r.gvr, r.ns, r.obj.GetName())
		if err != nil {
			return false, err.Error(), nil
		}
		misses = followMisses(follows, st)
		return !slices.ContainsFunc(misses, func(m string) bool { return m != "" && m != "-" }), strings.Join(misses, "; "), nil
	})
	if err != nil && misses == nil {
		misses = make([]string, len(follows))
		for i := range misses {
			misses[i] = "unread: " + err.Error()
		}
	}
	for i, f := range follows {
		if misses[i] == "-" {
			continue
		}
		seen := &r.follows[i]
		seen.judged++
		if misses[i] != "" && seen.violation == "" {
			seen.violation = fmt.Sprintf("after %s: %s", moment, misses[i])
			r.e.logf("%s: %s %s does not follow %s after %s: %s", r.s.Metadata.Name, f.Object, f.Path, f.Field, moment, misses[i])
		}
	}
}

// followMisses says, for each follow, what is wrong in st: "" when the
// child holds the spec field's value, "-" when the spec leaves the field
// unset (not judged).
func followMisses(follows []scenario.Follow, st *compare.State) []string {
	out := make([]string, len(follows))
	for i, f := range follows {
		want, set := flatten(map[string]any{"spec": st.Spec})[f.Field]
		if !set {
			out[i] = "-"
			continue
		}
		child, ok := st.Children[f.Object]
		if !ok {
			out[i] = fmt.Sprintf("%s=%s, but there is no %s", f.Field, compare.Show(want), f.Object)
			continue
		}
		got, ok := flatten(child)[f.Path]
		switch {
		case !ok:
			out[i] = fmt.Sprintf("%s=%s, but %s has no %s", f.Field, compare.Show(want), f.Object, f.Path)
		case !sameValue(want, got):
			out[i] = fmt.Sprintf("%s=%s, but %s %s is %s", f.Field, compare.Show(want), f.Object, f.Path, compare.Show(got))
		}
	}
	return out
}

// followChecks are the consistency oracle's checks, one a follow, once
// the end was judged.
func (r *run) followChecks() []report.Check {
	var out []report.Check
	for i, f := range r.s.Spec.Assertions.Follows {
		var seen followSeen
		if i < len(r.follows) {
			seen = r.follows[i]
		}
		c := report.Check{Kind: "consistency", Name: fmt.Sprintf("%s %s follows %s", f.Object, f.Path, f.Field),
			Value: fmt.Sprintf("held at %d moments", seen.judged), Budget: fmt.Sprintf("within %s of converging", followGrace)}
		if seen.violation != "" {
			c.Value, c.Violation = "missed", seen.violation
		}
		out = append(out, c)
	}
	return out
}

// flatten lists a JSON-like value's scalar leaves by path: keys joined by
// dots, list items as [i].
func flatten(v map[string]any) map[string]any {
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

// sameValue says whether a child's value carries a spec value: equal as
// text, as numbers, or as quantities (1Gi and 1024Mi, 0.5 and 500m).
func sameValue(want, got any) bool {
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

// followLearner learns which children's fields carry which spec fields
// from resources created with different specs (the reference runs): a
// child field follows a spec field when, in at least two creations with
// different values of the spec field, it held that value, and no
// creation contradicts it.
type followLearner struct {
	creations []*compare.State
}

// observe adds a resource created with its spec, once converged.
func (l *followLearner) observe(st *compare.State) {
	if st != nil {
		l.creations = append(l.creations, st)
	}
}

// follows are the follows learned for the spec fields named and the
// leaves under them (a map's keys, a list's items).
func (l *followLearner) follows(fields []string) []scenario.Follow {
	type tally struct {
		values map[string]bool
		broken bool
	}
	seen := map[scenario.Follow]*tally{}
	for _, c := range l.creations {
		children := map[string]map[string]any{}
		for obj, child := range c.Children {
			children[obj] = flatten(child)
		}
		for field, want := range flatten(map[string]any{"spec": c.Spec}) {
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
					if sameValue(want, got) {
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

// referenceRun creates the base scenario's resource as it is, with no
// step, and returns its result and, when it passed, what it converged
// to: the first creation the consistency oracle learns from.
func (e *Engine) referenceRun(ctx context.Context, base *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State, error) {
	obj, err := e.baseObject(base)
	if err != nil {
		return nil, nil, err
	}
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	dir := filepath.Join(artifacts, "reference")
	ref, err := e.freshScenario(base, spec, dir)
	if err != nil {
		return nil, nil, err
	}
	ref.Metadata.Name = base.Metadata.Name + "-reference"
	ref.Metadata.Description = "explore: the starting resource, as it is, with no step (the reference run)"
	e.o.Set.Files[ref.Metadata.Name] = filepath.Join(dir, "scenario.yaml")
	res, end := e.runOnce(ctx, ref, seed, artifacts, true)
	return res, end, nil
}
