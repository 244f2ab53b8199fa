// Package simulation runs the reference operator through the simulation
// tier: seeded, perturbed schedules with crashes, stale reads, API errors and
// lost events, checked by invariants after every step.
package simulation

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// seeds explored by `make test-sim`; `make soak-sim SEEDS=N` explores more.
const seeds = 150

func TestSimulation(t *testing.T) {
	tally := &sim.Tally{}
	ran := sim.Check(t, reference.SimTarget(reference.SimOptions{}), sim.CheckOptions{Seeds: seeds, Package: "./suites/simulation", Options: sim.Options{Tally: tally}})
	t.Logf("%d schedules, each with its fault-free twin, and no invariant broken; what the runs noted: %s", ran, tally)
}

// TestSimulationEventsOnly: the operator without member-health polling
// still converges on events alone, thanks to its StatefulSet predicate.
func TestSimulationEventsOnly(t *testing.T) {
	target := reference.SimTarget(reference.SimOptions{WithoutMemberAPI: true})
	target.Name = "databasecluster-events-only"
	ran := sim.Check(t, target, sim.CheckOptions{Seeds: seeds / 3, Package: "./suites/simulation"})
	t.Logf("%d schedules without member-health polling, no invariant broken", ran)
}

// TestSimulationSmallClusters: clusters of one and two members, which
// tolerate no member down, through failed members, deleted and unready pods,
// image changes (which the operator must refuse to roll), failed backups and
// deletion, with every fault; each image change arms a member failure that
// fires while the refused upgrade is pending (MidChangeFailures). Member
// failures must reach them: counted from what the runs noted, in at least
// minCombined schedules per size.
func TestSimulationSmallClusters(t *testing.T) {
	for _, n := range []int32{1, 2} {
		t.Run(fmt.Sprintf("%d-member", n), func(t *testing.T) {
			tally := &sim.Tally{}
			target := reference.SimTarget(reference.SimOptions{Replicas: n, MidChangeFailures: true})
			target.Name = fmt.Sprintf("databasecluster-%d-member", n)
			ran := sim.Check(t, target, sim.CheckOptions{Seeds: seeds / 3, Package: "./suites/simulation", Options: sim.Options{Tally: tally}})
			t.Logf("%d schedules on a %d-member cluster, no invariant broken", ran, n)
			for _, label := range []string{reference.NoteFailureOfSize(n), reference.NoteFailureDuring(reference.OpRefusedUpgrade), reference.NoteJudged(reference.InvSmallSaysWhy)} {
				t.Logf("%-55s %4d schedule(s), %4d time(s)", label, tally.Schedules(label), tally.Times(label))
			}
			if got := tally.Schedules(reference.NoteFailureOfSize(n)); tally.Runs() >= seeds/3 && got < minCombined {
				t.Errorf("a member of the %d-member cluster failed in %d of %d schedules, want at least %d", n, got, tally.Runs(), minCombined)
			}
		})
	}
}

// TestSmallClusterRollIsRefused: a settled cluster of one or two members is
// given a new image, without faults. The operator must refuse the roll and
// say so; the rules' invariants judge that after every step (seeded
// schedules rarely reach a refused roll with every member healthy, so this
// schedule is written out), and the run must reach it and converge.
func TestSmallClusterRollIsRefused(t *testing.T) {
	for _, n := range []int32{1, 2} {
		t.Run(fmt.Sprintf("%d-member", n), func(t *testing.T) {
			g := NewWithT(t)
			target := reference.SimTarget(reference.SimOptions{Replicas: n, WithoutBackups: true})
			probe, err := sim.Run(t.Context(), target, sim.Schedule{}, sim.Options{SettlePasses: 1})
			g.Expect(err).NotTo(HaveOccurred())
			image := slices.Index(probe.Perturbations, "image")
			g.Expect(image).NotTo(BeNumerically("<", 0), "perturbations %v", probe.Perturbations)
			var actions []sim.Action
			for range 20 { // create and settle the cluster
				actions = append(actions, sim.Action{Kind: sim.Reconcile}, sim.Action{Kind: sim.Reconcile}, sim.Action{Kind: sim.WorldStep})
			}
			// Choice 0 picks gauntlet.dev/etcd:v3.6.15, not the cluster's image.
			actions = append(actions, sim.Action{Kind: sim.Perturb, Perturbation: image, Choice: 0})
			res, err := sim.Run(t.Context(), target, sim.Schedule{Actions: actions}, sim.Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Violation).To(BeNil(), "%s", strings.Join(res.Trace, "\n"))
			for _, inv := range []string{reference.InvSmallNotRolled, reference.InvSmallSaysWhy} {
				g.Expect(res.Notes).To(HaveKey(reference.NoteJudged(inv)), "the run never faced the roll to refuse:\n%s", strings.Join(res.Trace, "\n"))
			}
		})
	}
}

// TestSameSeedSameRun: a schedule is a pure function of its seed, and a run
// replays exactly.
func TestSameSeedSameRun(t *testing.T) {
	target := reference.SimTarget(reference.SimOptions{})
	for seed := uint64(1); seed <= 5; seed++ {
		s := sim.Generate(seed, sim.Config{Perturbations: 6})
		if fmt.Sprint(s) != fmt.Sprint(sim.Generate(seed, sim.Config{Perturbations: 6})) {
			t.Fatalf("seed %d: two schedules differ", seed)
		}
		a, err := sim.Run(t.Context(), target, s, sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := sim.Run(t.Context(), target, s, sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a.Trace, b.Trace); diff != "" {
			t.Fatalf("seed %d: the same schedule ran differently (-first +second):\n%s", seed, diff)
		}
		if diff := cmp.Diff(a.End, b.End); diff != "" {
			t.Fatalf("seed %d: the same schedule ended differently (-first +second):\n%s", seed, diff)
		}
	}
}
