//go:build e2e

package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/chaos"
	suite "github.com/gauntlet-dev/gauntlet/suites/chaos"
	"github.com/gauntlet-dev/gauntlet/suites/framework"
)

// TestChaos runs every selected scenario (GAUNTLET_CHAOS_SCENARIOS) on one
// kind cluster with the operator and Chaos Mesh, one subtest per scenario,
// and writes report.json, junit.xml and summary.md under
// $ARTIFACTS/chaos-<time>/. GAUNTLET_CHAOS_SEED replays a run.
func TestChaos(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	artifacts := filepath.Join(framework.ArtifactsDir(), "chaos-"+time.Now().UTC().Format("20060102-150405"))
	o, ro, err := suite.OptionsFromEnv(artifacts)
	if err != nil {
		t.Fatal(err)
	}
	setup, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	env, err := suite.Setup(setup, o)
	if err != nil {
		t.Fatalf("chaos setup: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Teardown(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	t.Logf("seed %d (replay with %s=%d); artifacts in %s", ro.Seed, suite.EnvSeed, ro.Seed, artifacts)
	rep := &chaos.Report{Seed: ro.Seed, Started: time.Now(), Cluster: env.Cluster.Name}
	for i, s := range suite.Scenarios {
		if ro.Match != nil && !ro.Match.MatchString(s.Name) {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			res := env.RunScenario(t.Context(), s, suite.ScenarioSeed(ro.Seed, i), ro)
			rep.Results = append(rep.Results, res)
			if err := rep.Write(artifacts); err != nil {
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
