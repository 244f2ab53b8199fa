package faultplan

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/explore"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// The seed draws which sequences run under a fault: never a single step,
// about half of the longer ones, the same each time.
func TestFaultsFor(t *testing.T) {
	g := NewWithT(t)
	one := []explore.Step{{Path: []string{"spec", "a"}, Value: 1}}
	two := append(slices.Clone(one), explore.Step{Path: []string{"spec", "b"}, Value: 2})
	plan := [][]explore.Step{one, one, one}
	for range 40 {
		plan = append(plan, two)
	}
	menu := []scenario.Fault{{Action: scenario.ActionWatchClose}, {Action: scenario.ActionStaleView}}
	got := For(plan, menu, 7)
	g.Expect(got[:3]).To(Equal([]*scenario.Fault{nil, nil, nil}))
	n := 0
	for _, f := range got {
		if f != nil {
			n++
		}
	}
	g.Expect(n).To(BeNumerically("~", 20, 10))
	g.Expect(For(plan, menu, 7)).To(Equal(got), "the seed replays it")
	g.Expect(For(plan, nil, 7)).To(HaveEach(BeNil()), "no menu, no fault")

	// Many view faults and one pod kill: the pod kill still holds over
	// about half the faulted sequences.
	mixed := []scenario.Fault{{Action: scenario.ActionPodKill, Target: "members"}}
	for range 14 {
		mixed = append(mixed, scenario.Fault{Action: scenario.ActionWatchClose})
	}
	kills, faulted := 0, 0
	for _, f := range For(plan, mixed, 7) {
		if f != nil {
			faulted++
			if f.Action == scenario.ActionPodKill {
				kills++
			}
		}
	}
	g.Expect(kills).To(BeNumerically("~", faulted/2, 6), "%d pod kills among %d faulted sequences", kills, faulted)

	// Six view faults: the first six faulted sequences hold each once.
	six := []scenario.Fault{}
	for _, a := range []string{scenario.ActionWatchClose, scenario.ActionStaleView, scenario.ActionAPIError,
		scenario.ActionKillAfterWrite, scenario.ActionWatchCoalesce, scenario.ActionAPILatency} {
		six = append(six, scenario.Fault{Action: a})
	}
	seen := map[string]bool{}
	for _, f := range For(plan, six, 7) {
		if f != nil && len(seen) < 6 {
			g.Expect(seen[f.Action]).To(BeFalse(), "%s twice before every fault held once", f.Action)
			seen[f.Action] = true
		}
	}
	g.Expect(seen).To(HaveLen(6))
}

// The sweep holds every fault of the menu once, each while one value a
// running resource can take changes; the seed replays it.
func TestFaultSweep(t *testing.T) {
	g := NewWithT(t)
	steps := []explore.Step{
		{Path: []string{"spec", "a"}, Value: 1, AtCreation: true},
		{Path: []string{"spec", "b"}, Value: 2}, {Path: []string{"spec", "c"}, Value: 3},
	}
	menu := []scenario.Fault{{Action: scenario.ActionWatchClose}, {Action: scenario.ActionStaleView}, {Action: scenario.ActionAPIError}}
	plan, faults := Sweep(steps, menu, 7)
	g.Expect(plan).To(HaveLen(3))
	g.Expect(faults).To(HaveLen(3))
	held := map[string]bool{}
	for i, f := range faults {
		held[f.Action] = true
		g.Expect(plan[i]).To(HaveLen(1))
		g.Expect(plan[i][0].AtCreation).To(BeFalse(), "a change to a running resource")
	}
	g.Expect(held).To(HaveLen(3), "every fault once")
	again, _ := Sweep(steps, menu, 7)
	g.Expect(again).To(Equal(plan))
	none, _ := Sweep(steps[:1], menu, 7)
	g.Expect(none).To(BeEmpty(), "no value changes a running resource")
}

// The sweep's runs alternate with the plan's first ones, each with its
// own fault.
func TestAlternate(t *testing.T) {
	g := NewWithT(t)
	step := func(v int) []explore.Step { return []explore.Step{{Path: []string{"spec", "a"}, Value: v}} }
	kill := &scenario.Fault{Action: scenario.ActionPodKill}
	stale := &scenario.Fault{Action: scenario.ActionStaleView}
	plan, faults := Alternate([][]explore.Step{step(1), step(2)}, []*scenario.Fault{kill, stale},
		[][]explore.Step{step(10), step(11), step(12)}, []*scenario.Fault{nil, nil, kill})
	var got []any
	for _, seq := range plan {
		got = append(got, seq[0].Value)
	}
	g.Expect(got).To(Equal([]any{1, 10, 2, 11, 12}))
	g.Expect(faults).To(Equal([]*scenario.Fault{kill, nil, stale, nil, kill}))
}
