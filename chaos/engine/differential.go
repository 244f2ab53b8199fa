package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// freshSuffix names the scenario a differential run's fresh resource is
// created by.
const freshSuffix = "-fresh"

// RunDifferential runs a scenario whose assertions ask for sameAsFresh:
// the scenario as written, then a fresh resource created with the spec it
// ended with, and compares the two end states. The first fresh run of a
// set is made twice, to learn what differs between two equal runs. It
// returns the fresh resource's end state too, when it got that far.
func (e *Engine) RunDifferential(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State) {
	start := time.Now()
	res, end := e.runOnce(ctx, s, seed, artifacts, false)
	if end == nil {
		// It failed before its end state was read; a failure after (of
		// the resource's deletion) leaves its end state to compare.
		return res, nil
	}
	fresh, err := e.freshScenario(s, end.Spec, filepath.Join(artifacts, s.Metadata.Name, "fresh"))
	if err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("writing the fresh resource's manifest: %v", err))
		return res, nil
	}
	e.logf("%s: a fresh resource with the spec it ended with, in a freshly started operator, to compare", s.Metadata.Name)
	freshRes, freshEnd := e.freshRun(ctx, fresh, seed, filepath.Join(artifacts, "fresh"))
	if freshEnd == nil {
		return freshUnjudged(freshRes, "the fresh resource with the final spec", s.Metadata.Name, start), nil
	}
	if !e.calibrated {
		if again := e.calibrate(ctx, fresh, seed, filepath.Join(artifacts, "fresh-2"), freshEnd, e.freshRun); again != nil {
			return freshUnjudged(again, "the second fresh resource", s.Metadata.Name, start), nil
		}
	}
	check, diff := compare.Fresh(freshEnd, end, e.noise)
	res.Checks = append(res.Checks, check)
	res.Violations = append(res.Violations, report.Violations([]report.Check{check})...)
	res.Twin = diff
	e.logf("%s: against a fresh resource with its final spec: %d differences", s.Metadata.Name, len(diff.Differences))
	res.Took = time.Since(start)
	return res, freshEnd
}

// runner runs a scenario once, fault-free, and returns its end state.
type runner func(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State)

// twinRun runs a scenario as its fault-free twin.
func (e *Engine) twinRun(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State) {
	return e.runOnce(ctx, s, seed, artifacts, true)
}

// freshRun runs a fresh resource's scenario in a freshly started
// operator: a process with no memory of the run it is compared with, so
// that what an operator carries from one resource to the next (a package
// variable set once and never reset, a cache never pruned) shows as a
// difference rather than being shared by both sides.
func (e *Engine) freshRun(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State) {
	if err := e.restartOperator(ctx); err != nil {
		r := &run{e: e, s: s, res: &report.Result{Run: &report.Run{Scenario: s.Metadata.Name, Seed: seed}, Description: s.Metadata.Description}}
		return r.fail("starting the operator afresh for the fresh resource: %v", err), nil
	}
	return e.twinRun(ctx, s, seed, artifacts)
}

// freshScenario is s with no before or during actions and no fault,
// whose resource is s's manifest with spec, written in dir.
func (e *Engine) freshScenario(s *scenario.Scenario, spec map[string]any, dir string) (*scenario.Scenario, error) {
	obj, err := e.Object(s)
	if err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(obj.Object, spec, "spec"); err != nil {
		return nil, err
	}
	b, err := sigsyaml.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "resource.yaml"), b, 0o644); err != nil {
		return nil, err
	}
	f := *s
	f.Metadata.Name = s.Metadata.Name + freshSuffix
	f.Spec.Resource.Manifest = "resource.yaml"
	f.Spec.Before, f.Spec.During, f.Spec.Workload = nil, nil, nil
	f.Spec.Fault = scenario.Fault{Action: scenario.ActionNone, Hold: metav1.Duration{Duration: time.Second}}
	f.Spec.Assertions = scenario.Assertions{StableFor: s.Spec.Assertions.StableFor, OperatorRestarts: s.Spec.Assertions.OperatorRestarts}
	e.o.Set.Files[f.Metadata.Name] = filepath.Join(dir, "scenario.yaml")
	return &f, nil
}

// calibrate runs s once more with run, fault-free, and learns what
// differs between that run and first, which ran the same way: noise, not
// a finding. It returns the second run's result when it failed before its
// end state was read.
func (e *Engine) calibrate(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string, first *compare.State, run runner) *report.Result {
	e.logf("%s: once more without a fault, to learn what differs between equal runs", s.Metadata.Name)
	againRes, again := run(ctx, s, seed, artifacts)
	if again == nil {
		return againRes
	}
	e.learnNoise(first, again)
	e.calibrated = true
	return nil
}

// freshUnjudged is the result of a run whose fresh resource did not pass:
// its end state cannot be judged against it. It is reported under the
// run's name, which the campaign's findings link to.
func freshUnjudged(fresh *report.Result, which, name string, start time.Time) *report.Result {
	fresh.Took = time.Since(start)
	fresh.Errors = append([]string{which + " did not pass, so the run's end state cannot be judged against it"}, fresh.Errors...)
	if fresh.Run != nil {
		fresh.Scenario = name
	}
	return fresh
}

// unjudged is the result of a scenario whose fault-free twin did not
// pass before its end state was read: the fault cannot be judged against
// it. A twin that broke an oracle only in its deletion is judged on: the
// faulted run's own deletion answers for that.
func unjudged(twin *report.Result, which string, start time.Time) *report.Result {
	twin.Took = time.Since(start)
	twin.Errors = append([]string{which + " did not pass, so the fault cannot be judged against it"}, twin.Errors...)
	return twin
}

// learnNoise adds what differs between two fault-free end states to the
// engine's noise.
func (e *Engine) learnNoise(a, b *compare.State) {
	if e.noise == nil {
		e.noise = compare.Noise{}
	}
	if learned := e.noise.Learn(a, b); len(learned) > 0 {
		e.logf("differs between two fault-free runs, so never a finding: %s", strings.Join(learned, ", "))
	}
}
