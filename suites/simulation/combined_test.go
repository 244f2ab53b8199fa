package simulation

import (
	"fmt"
	"testing"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// combinedSeeds are explored per starting size by
// TestSimulationCombinedPerturbations.
const combinedSeeds = 100

// minCombined is how many schedules must have reached each combination.
const minCombined = 5

// TestSimulationCombinedPerturbations: a member fails while a scale (up or
// down), an upgrade or a member replacement is in flight, with every fault
// and invariant. Each change arms a member failure that the world fires
// inside the change's window (SimOptions.MidChangeFailures); clusters start
// at 3 and at 5 members, so that scales go both ways. The counts come from
// what the simulated world noted in each run, and every combination must
// have been reached by at least minCombined schedules.
func TestSimulationCombinedPerturbations(t *testing.T) {
	tally := &sim.Tally{}
	for _, n := range []int32{3, 5} {
		t.Run(fmt.Sprintf("%d-member", n), func(t *testing.T) {
			target := reference.SimTarget(reference.SimOptions{Replicas: n, MidChangeFailures: true})
			target.Name = fmt.Sprintf("databasecluster-%d-member-mid-change-failures", n)
			ran := sim.Check(t, target, sim.CheckOptions{Seeds: combinedSeeds, Package: "./suites/simulation", Options: sim.Options{Tally: tally}})
			t.Logf("%d schedules from %d members, no invariant broken", ran, n)
		})
	}
	if t.Failed() {
		return
	}
	t.Logf("what the runs noted: %s", tally)
	if tally.Runs() < 2*combinedSeeds {
		t.Logf("%d schedule(s) replayed: coverage not judged", tally.Runs())
		return
	}
	for _, op := range []string{reference.OpScale, reference.OpScaleUp, reference.OpScaleDown, reference.OpUpgrade, reference.OpReplacement} {
		label := reference.NoteFailureDuring(op)
		got := tally.Schedules(label)
		t.Logf("%-55s %4d schedule(s), %4d time(s)", label, got, tally.Times(label))
		if got < minCombined {
			t.Errorf("%q reached in %d of %d schedules, want at least %d", label, got, tally.Runs(), minCombined)
		}
	}
}
