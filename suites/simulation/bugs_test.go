package simulation

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// The deliberately buggy variants of the reference operator are patches,
// suites/bugs/<variant>.patch, kept out of the operator's code. make test-sim
// applies each in turn to a scratch copy of the tree (suites/bugs/scratch.sh)
// and runs TestSimulationFindsBug there with GAUNTLET_BUG=<variant>.
const (
	envBug = "GAUNTLET_BUG"
	// root is the repository's root, from this package's directory.
	root = "../.."
)

// maxSeedsPerBug bounds the search for each bug.
const maxSeedsPerBug = 400

// TestSimulationFindsBug requires the simulation tier to catch the bug
// variant this copy of the tree is patched with, then shrinks the failure.
// It prints how many schedules it took, which invariant broke and how far
// the faults shrank.
func TestSimulationFindsBug(t *testing.T) {
	bug := os.Getenv(envBug)
	if bug == "" {
		t.Skip("runs under make test-sim on a copy patched with suites/bugs/<variant>.patch, with " + envBug + "=<variant>")
	}
	patch := filepath.Join("suites", "bugs", bug+".patch")
	if out, err := gitApply("--check", "--reverse", patch); err != nil {
		t.Fatalf("%s=%s, but %s is not applied to this tree (%v: %s)", envBug, bug, patch, err, out)
	}
	// No variant's bug is in backups: without them the search is not
	// diluted by backup failures (TestSimulation explores them). Every
	// change arms a member failure for its window (MidChangeFailures), and
	// the scale-down bug's cluster starts at 5 members, so that its first
	// scale shrinks it: that bug shows only when members fail while a
	// scale-down is under way.
	o := reference.SimOptions{WithoutBackups: true, MidChangeFailures: true}
	if bug == "unsafe-scale-down" {
		o.Replicas = 5
	}
	target := reference.SimTarget(o)
	target.Name = fmt.Sprintf("databasecluster-%d-member-mid-change-failures", max(o.Replicas, 3))
	findBug(t, bug, target)
}

// TestSimulationFindsGenerationPredicate: the scaffolds' predicate on owned
// StatefulSets (unobserved state), on an operator that relies on events
// alone (no member-health polling, whose timer would repair the stale status
// within a minute). This variant needs no patch: the target takes the
// predicate.
func TestSimulationFindsGenerationPredicate(t *testing.T) {
	naive := reference.SimTarget(reference.SimOptions{StatefulSetPredicate: predicate.GenerationChangedPredicate{}, WithoutMemberAPI: true, WithoutBackups: true})
	naive.Name = "databasecluster-generation-predicate"
	findBug(t, "generation-changed-predicate", naive)
}

// TestBugPatchesApply keeps the bug variants from rotting: every patch must
// still apply to the code it breaks, the Memcached example's included.
func TestBugPatchesApply(t *testing.T) {
	if os.Getenv(envBug) != "" {
		t.Skip("this copy of the tree is patched with a bug variant")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	patches, _ := filepath.Glob(filepath.Join(root, "suites", "bugs", "*.patch"))
	examples, _ := filepath.Glob(filepath.Join(root, "suites", "examples", "*", "bugs", "*.patch"))
	patches = append(patches, examples...)
	if len(patches) == 0 {
		t.Fatal("no patches in suites/bugs")
	}
	for _, p := range patches {
		patch, _ := filepath.Rel(root, p)
		t.Run(strings.TrimSuffix(patch, ".patch"), func(t *testing.T) {
			if out, err := gitApply("--check", patch); err != nil {
				t.Errorf("%s no longer applies to the code it breaks (%v); make the bug again on the current code and regenerate the patch (suites/bugs/README.md):\n%s", patch, err, out)
			}
		})
	}
}

// gitApply runs git apply at the repository's root, as if the root were a
// tree of its own: inside an enclosing repository, git apply would apply
// only what lies under the current directory and skip the rest in silence.
func gitApply(args ...string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("git", append([]string{"apply"}, args...)...)
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(abs))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// findBug explores schedules until one breaks an invariant, shrinks it and
// reports it: the variant, the schedules it took, the invariant broken, the
// faults found and left after shrinking, and which changes were in flight
// when a member failed.
func findBug(t *testing.T, name string, target sim.Target) {
	t.Helper()
	failure, ran, err := sim.RunSeeds(t.Context(), target, 1, maxSeedsPerBug, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if failure == nil {
		t.Fatalf("the simulation tier did not catch %s in %d schedules", name, ran)
	}
	shrunk, err := sim.Shrink(t.Context(), target, failure, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s caught after %d schedule(s):\n%s", name, ran, shrunk.Violation)
	t.Logf("\n%-30s %9s  %-55s %-30s %s\n%-30s %9d  %-55s %-30s %s",
		"variant", "schedules", "invariant broken", "faults (found -> shrunk)", "a member failed mid-change",
		name, ran,
		truncate(string(shrunk.Violation.Kind)+": "+shrunk.Violation.Invariant, 55),
		fmt.Sprintf("%d -> %d (seed %d)", len(failure.Schedule.Faults()), len(shrunk.Schedule.Faults()), shrunk.Schedule.Seed),
		combinations(shrunk.Notes))
}

// combinations lists the changes in flight when a member failed in a run,
// from what the run noted.
func combinations(notes map[string]int) string {
	var ops []string
	for _, op := range []string{reference.OpScaleUp, reference.OpScaleDown, reference.OpUpgrade, reference.OpReplacement, reference.OpRefusedUpgrade} {
		if notes[reference.NoteFailureDuring(op)] > 0 {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return "-"
	}
	return strings.Join(ops, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
