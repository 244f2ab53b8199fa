//go:build e2e

package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// Environment variables make test-chaos and make test-chaos-bug set.
const (
	envSeed      = "GAUNTLET_CHAOS_SEED"      // replay a run
	envScenarios = "GAUNTLET_CHAOS_SCENARIOS" // comma-separated names (default: all)
	envParallel  = "GAUNTLET_CHAOS_PARALLEL"  // scenarios at once (default 3, as gauntlet run)
)

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// setup loads the scenario files, brings up a kind cluster with the
// operator their Operator file describes (with the overrides applied)
// and Chaos Mesh, and tears it down when the test ends.
func setup(t *testing.T, paths []string, overrides map[string]string) *engine.Engine {
	t.Helper()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	set, err := scenario.LoadPaths(paths...)
	if err != nil {
		t.Fatalf("the scenario files: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	e, err := engine.Setup(ctx, engine.Options{
		Cluster: cluster.Options{
			NodeImage:  getenv("GAUNTLET_NODE_IMAGE", cluster.DefaultNodeImage),
			ConfigFile: framework.CRDPath(getenv("GAUNTLET_KIND_CONFIG", cluster.DefaultKindConfig)),
		},
		Chaos: install.Options{
			ControllerImage: getenv("CHAOS_CONTROLLER_IMAGE", install.DefaultControllerImage),
			DaemonImage:     getenv("CHAOS_DAEMON_IMAGE", install.DefaultDaemonImage),
		},
		Set: set, Overrides: overrides,
	})
	if err != nil {
		t.Fatalf("chaos setup: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Teardown(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return e
}

func seed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv(envSeed)
	if s == "" {
		return uint64(time.Now().UnixNano() % 1_000_000)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a non-negative integer", envSeed, s)
	}
	return v
}

// TestChaos runs the reference operator's scenario files (scenarios/)
// through the engine on one kind cluster, one subtest per scenario, and
// writes the report under $ARTIFACTS/chaos-<time>/.
func TestChaos(t *testing.T) {
	artifacts := filepath.Join(framework.ArtifactsDir(), "chaos-"+time.Now().UTC().Format("20060102-150405"))
	e := setup(t, []string{"scenarios"}, nil)
	s := seed(t)
	var only []string
	if v := os.Getenv(envScenarios); v != "" {
		only = strings.Split(v, ",")
	}
	parallel, err := strconv.Atoi(getenv(envParallel, "3"))
	if err != nil || parallel < 1 {
		t.Fatalf("%s=%q: want 1 (one scenario after another) or more", envParallel, os.Getenv(envParallel))
	}
	t.Logf("seed %d (replay with %s=%d); artifacts in %s", s, envSeed, s, artifacts)
	rep, err := e.RunAll(t.Context(), engine.RunOptions{Seed: s, Only: only, Artifacts: artifacts, Parallel: parallel})
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rep.Results {
		t.Run(res.Scenario, func(t *testing.T) {
			switch res.Verdict() {
			case report.Skipped:
				t.Skipf("%s (lifts on a node kernel with the feature; the run's summary lists it as skipped)", res.Skipped)
			case report.Failed:
				for _, e := range append(append([]string(nil), res.Errors...), res.Violations...) {
					t.Error(e)
				}
				t.Logf("replay: bin/gauntlet replay %s %s; evidence in %s", artifacts, res.Scenario, res.Artifacts)
			}
		})
	}
	t.Logf("summary:\n%s", rep.Summary())
}

// caught maps a bug variant (suites/bugs/<variant>.patch) to the scenario
// that must catch it and a violation the judgement must report.
var caught = map[string]struct{ file, violation string }{
	// Every member pod deleted at once on an image change: quorum is lost
	// during an upgrade that should never cost it.
	"impatient-roll": {"scenarios/12-upgrade-under-minority-pod-kill.yaml", "Available turned False during the fault"},
}

// TestChaosCatchesABuggyOperator runs a buggy operator, its image built from
// a copy of the tree patched with one bug variant, through the scenario file
// that must catch it, and fails unless the judgement reports the violation:
// the chaos tier's checks can fail on a real cluster.
func TestChaosCatchesABuggyOperator(t *testing.T) {
	bug := os.Getenv("GAUNTLET_CHAOS_BUG")
	if bug == "" {
		t.Skip("runs under make test-chaos-bug, which builds the operator image from a copy patched with suites/bugs/<variant>.patch and sets GAUNTLET_CHAOS_BUG")
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
	e := setup(t, []string{"scenarios/operator.yaml", want.file}, map[string]string{"OPERATOR_IMAGE": image})
	rep, err := e.RunAll(t.Context(), engine.RunOptions{Seed: seed(t), Artifacts: artifacts})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	t.Logf("with the %s operator, %s: %s; errors %v; violations %v", bug, res.Scenario, res.Verdict(), res.Errors, res.Violations)
	if res.Verdict() != report.Failed || !slices.ContainsFunc(res.Violations, func(v string) bool { return strings.Contains(v, want.violation) }) {
		t.Fatalf("the chaos tier did not catch %s: want a violation containing %q", bug, want.violation)
	}
}
