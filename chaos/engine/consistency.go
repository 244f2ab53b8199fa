package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
		misses = compare.FollowMisses(follows, st)
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

// ReferenceRun creates the base scenario's resource as it is, with no
// step, and returns its result and, when it passed, what it converged
// to: the first creation the consistency oracle learns from.
func (e *Engine) ReferenceRun(ctx context.Context, base *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State, error) {
	obj, err := e.Object(base)
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
