//go:build gauntlet_bugs

package simulation

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/operator"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// maxSeedsPerBug bounds the search for each bug.
const maxSeedsPerBug = 400

// TestSimulationFindsEveryBug switches on each deliberately buggy variant of
// the reference reconciler and requires the simulation tier to catch it,
// then shrinks the failure. It prints, per variant, how many schedules it
// took, which invariant broke and how far the faults shrank.
func TestSimulationFindsEveryBug(t *testing.T) {
	type variant struct {
		name   string
		bug    operator.Bug
		target sim.Target
	}
	var variants []variant
	// No variant's bug is in backups: without them the search is not
	// diluted by backup failures (TestSimulation explores them). Every
	// change arms a member failure for its window (MidChangeFailures), and
	// the scale-down bug's cluster starts at 5 members, so that its first
	// scale shrinks it: that bug shows only when members fail while a
	// scale-down is under way.
	for _, b := range operator.AllBugs {
		o := reference.SimOptions{WithoutBackups: true, MidChangeFailures: true}
		if b == "unsafe-scale-down" {
			o.Replicas = 5
		}
		target := reference.SimTarget(o)
		target.Name = fmt.Sprintf("databasecluster-%d-member-mid-change-failures", max(o.Replicas, 3))
		variants = append(variants, variant{string(b), b, target})
	}
	// The scaffolds' predicate on owned StatefulSets (unobserved state), on
	// an operator that relies on events alone (no member-health polling,
	// whose timer would repair the stale status within a minute).
	naive := reference.SimTarget(reference.SimOptions{StatefulSetPredicate: predicate.GenerationChangedPredicate{}, WithoutMemberAPI: true, WithoutBackups: true})
	naive.Name = "databasecluster-generation-predicate"
	variants = append(variants, variant{"generation-changed-predicate", "", naive})

	var report strings.Builder
	fmt.Fprintf(&report, "\n%-30s %9s  %-55s %-30s %s\n", "variant", "schedules", "invariant broken", "faults (found -> shrunk)", "a member failed mid-change")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if v.bug != "" {
				t.Cleanup(operator.EnableBug(v.bug))
			}
			failure, ran, err := sim.Explore(t.Context(), v.target, 1, maxSeedsPerBug, sim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if failure == nil {
				t.Fatalf("the simulation tier did not catch %s in %d schedules", v.name, ran)
			}
			shrunk, err := sim.Shrink(t.Context(), v.target, failure, sim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&report, "%-30s %9d  %-55s %-30s %s\n", v.name, ran,
				truncate(string(shrunk.Violation.Kind)+": "+shrunk.Violation.Invariant, 55),
				fmt.Sprintf("%d -> %d (seed %d)", len(failure.Schedule.Faults()), len(shrunk.Schedule.Faults()), shrunk.Schedule.Seed),
				combinations(shrunk.Notes))
			t.Logf("%s caught after %d schedule(s):\n%s", v.name, ran, shrunk.Violation)
		})
	}
	t.Log(report.String())
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
