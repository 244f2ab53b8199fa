package faultplan

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// The seed draws which sequences run under a fault: never a single step,
// about half of the longer ones, the same each time.
func TestFaultsFor(t *testing.T) {
	g := NewWithT(t)
	one := []space.Step{{Path: []string{"spec", "a"}, Value: 1}}
	two := append(slices.Clone(one), space.Step{Path: []string{"spec", "b"}, Value: 2})
	plan := [][]space.Step{one, one, one}
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
// running resource can take changes; the seed replays it. A fault on the
// resource's own requests changes a value the resource holds.
func TestFaultSweep(t *testing.T) {
	g := NewWithT(t)
	steps := []space.Step{
		{Path: []string{"spec", "a"}, Value: 1, AtCreation: true},
		{Path: []string{"spec", "b"}, Value: 2}, {Path: []string{"spec", "c"}, Value: 3},
		{Path: []string{"spec", "d"}, Value: 4}, {Path: []string{"spec", "b"}, Unset: true},
	}
	base := map[string]any{"spec": map[string]any{"a": int64(0), "b": int64(1)}}
	own := func(a string) scenario.Fault {
		return scenario.Fault{Action: a, Requests: &scenario.RequestMatch{Resource: "things"}}
	}
	menu := []scenario.Fault{{Action: scenario.ActionWatchClose}, own(scenario.ActionStaleView), own(scenario.ActionWatchCoalesce),
		{Action: scenario.ActionAPIError, Requests: &scenario.RequestMatch{Resource: "statefulsets"}}}
	plan, faults := Sweep(steps, menu, 7, "things", base)
	g.Expect(plan).To(HaveLen(4))
	g.Expect(faults).To(HaveLen(4))
	held, others := map[string]bool{}, map[string]bool{}
	for i, f := range faults {
		held[f.Action] = true
		g.Expect(plan[i]).To(HaveLen(1))
		st := plan[i][0]
		g.Expect(st.AtCreation).To(BeFalse(), "a change to a running resource")
		if f.Requests != nil && f.Requests.Resource == "things" {
			g.Expect(st.Field()).To(Equal("spec.b"), "%s: a value the resource holds, changed", f.Action)
			g.Expect(st.Unset).To(BeFalse(), "%s: changed, not removed", f.Action)
		} else {
			others[st.Field()] = true
		}
	}
	g.Expect(held).To(HaveLen(4), "every fault once")
	g.Expect(others).To(HaveLen(2), "the other faults meet other fields, in rounds")
	again, _ := Sweep(steps, menu, 7, "things", base)
	g.Expect(again).To(Equal(plan))
	none, _ := Sweep(steps[:1], menu, 7, "things", base)
	g.Expect(none).To(BeEmpty(), "no value changes a running resource")

	// A resource that holds nothing that changes: its own faults take
	// any change.
	plan, _ = Sweep(steps, menu, 7, "things", map[string]any{"spec": map[string]any{"a": int64(0)}})
	g.Expect(plan).To(HaveLen(4))
}

// The sweep's runs alternate with the plan's first ones, each with its
// own fault.
func TestAlternate(t *testing.T) {
	g := NewWithT(t)
	step := func(v int) []space.Step { return []space.Step{{Path: []string{"spec", "a"}, Value: v}} }
	kill := &scenario.Fault{Action: scenario.ActionPodKill}
	stale := &scenario.Fault{Action: scenario.ActionStaleView}
	plan, faults := Alternate([][]space.Step{step(1), step(2)}, []*scenario.Fault{kill, stale},
		[][]space.Step{step(10), step(11), step(12)}, []*scenario.Fault{nil, nil, kill})
	var got []any
	for _, seq := range plan {
		got = append(got, seq[0].Value)
	}
	g.Expect(got).To(Equal([]any{1, 10, 2, 11, 12}))
	g.Expect(faults).To(Equal([]*scenario.Fault{kill, nil, stale, nil, kill}))
}
