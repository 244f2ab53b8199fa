//go:build e2e

package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/chaos"
	suite "github.com/gauntlet-dev/gauntlet/suites/chaos"
	"github.com/gauntlet-dev/gauntlet/suites/framework"
)

// setup builds the environment from the environment variables make sets,
// adjusted by adjust, brings it up (the cluster is torn down when the test
// ends) and returns it with the run options.
func setup(t *testing.T, artifacts string, adjust func(*suite.Options)) (*suite.Env, suite.RunOptions) {
	t.Helper()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	o, ro, err := suite.OptionsFromEnv(artifacts)
	if err != nil {
		t.Fatal(err)
	}
	adjust(&o)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	env, err := suite.Setup(ctx, o)
	if err != nil {
		t.Fatalf("chaos setup: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Teardown(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return env, ro
}

// TestChaos runs every selected scenario (GAUNTLET_CHAOS_SCENARIOS) on one
// kind cluster with the operator and Chaos Mesh, one subtest per scenario,
// and writes report.json, junit.xml and summary.md under
// $ARTIFACTS/chaos-<time>/. GAUNTLET_CHAOS_SEED replays a run.
func TestChaos(t *testing.T) {
	artifacts := filepath.Join(framework.ArtifactsDir(), "chaos-"+time.Now().UTC().Format("20060102-150405"))
	env, ro := setup(t, artifacts, func(*suite.Options) {})
	t.Logf("seed %d (replay with %s=%d); artifacts in %s", ro.Seed, suite.EnvSeed, ro.Seed, artifacts)
	rep := chaos.NewReport(ro.Seed, env.Cluster.Name)
	for i, s := range suite.Scenarios {
		if ro.Match != nil && !ro.Match.MatchString(s.Name) {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			res := env.RunScenario(t.Context(), s, suite.ScenarioSeed(ro.Seed, i), ro)
			rep.Results = append(rep.Results, res)
			if err := suite.WriteReport(rep, artifacts); err != nil {
				t.Errorf("writing the report: %v", err)
			}
			switch res.Verdict() {
			case chaos.Skipped:
				t.Skipf("%s (lifts on a node kernel with the feature; the run's summary lists it as skipped)", res.Skipped)
			case chaos.Failed:
				for _, e := range append(append([]string(nil), res.Errors...), res.Violations...) {
					t.Error(e)
				}
				t.Logf("replay: %s=%d %s='^%s$'; evidence in %s", suite.EnvSeed, ro.Seed, suite.EnvScenarios, s.Name, res.Artifacts)
			}
			t.Logf("%+v", res.Figures)
		})
	}
	t.Logf("summary:\n%s", rep.Summary())
}

// caught maps a bug variant to the scenario that must catch it and a
// violation the judgement must report.
var caught = map[string]struct{ scenario, violation string }{
	// Every member pod deleted at once on an image change: quorum is lost
	// during an upgrade that should never cost it.
	"impatient-roll": {"upgrade-under-minority-pod-kill", "Available turned False"},
}

// TestChaosCatchesABuggyOperator runs the operator built with -tags
// gauntlet_bugs and one bug switched on (--bug) through the scenario that
// must catch it, and fails unless the judgement reports the violation: the
// chaos tier's checks can fail on a real cluster, not only in unit tests.
func TestChaosCatchesABuggyOperator(t *testing.T) {
	bug := os.Getenv("GAUNTLET_CHAOS_BUG")
	if bug == "" {
		t.Skip("runs under make test-chaos-bug, which builds the operator with -tags gauntlet_bugs and sets GAUNTLET_CHAOS_BUG")
	}
	want, ok := caught[bug]
	if !ok {
		t.Fatalf("GAUNTLET_CHAOS_BUG=%q: no scenario is known to catch it (known: %v)", bug, caught)
	}
	image := os.Getenv("OPERATOR_BUGS_IMAGE")
	if image == "" {
		t.Fatal("OPERATOR_BUGS_IMAGE is not set (make test-chaos-bug sets it)")
	}
	artifacts := filepath.Join(framework.ArtifactsDir(), "chaos-bug-"+bug+"-"+time.Now().UTC().Format("20060102-150405"))
	env, ro := setup(t, artifacts, func(o *suite.Options) {
		o.E2E.OperatorImage = image
		o.E2E.OperatorArgs = []string{"--bug=" + bug}
	})
	for i, s := range suite.Scenarios {
		if s.Name != want.scenario {
			continue
		}
		res := env.RunScenario(t.Context(), s, suite.ScenarioSeed(ro.Seed, i), ro)
		rep := chaos.NewReport(ro.Seed, env.Cluster.Name)
		rep.Results = []*chaos.Result{res}
		if err := suite.WriteReport(rep, artifacts); err != nil {
			t.Errorf("writing the report: %v", err)
		}
		t.Logf("with --bug=%s, %s: %s; errors %v; violations %v", bug, s.Name, res.Verdict(), res.Errors, res.Violations)
		if res.Verdict() != chaos.Failed || !slices.ContainsFunc(res.Violations, func(v string) bool { return strings.Contains(v, want.violation) }) {
			t.Fatalf("the chaos tier did not catch %s: want a violation containing %q", bug, want.violation)
		}
		return
	}
	t.Fatalf("scenario %s not found", want.scenario)
}
