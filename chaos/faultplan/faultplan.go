// Package faultplan decides which runs of a campaign hold which fault:
// the menu's faults swept once early, then spread over the plan's
// sequences, and the kills after the writes a change made that the
// reference run never did. It knows the steps and the faults, not how a
// run is made.
package faultplan

import (
	"math/rand/v2"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// For draws, with the seed, which of the plan's sequences run
// under a fault from menu: half of those of two steps or more; single
// steps run without one (they teach the consistency oracle and judge each
// value alone). When the menu holds faults of both layers, view faults
// through the API proxy and Chaos Mesh faults on the cluster, each
// faulted sequence first draws its layer, so that a menu of many view
// faults and a few pod kills still gives each layer half the sequences.
// Within a layer the faults come in a seeded order, each once before any
// twice, so that a short campaign holds as many different faults as it
// can.
func For(plan [][]space.Step, menu []scenario.Fault, seed uint64) []*scenario.Fault {
	out := make([]*scenario.Fault, len(plan))
	if len(menu) == 0 {
		return out
	}
	rng := rand.New(rand.NewPCG(seed, 27))
	var view, infra cycle
	for _, f := range menu {
		if scenario.IsViewAction(f.Action) {
			view.faults = append(view.faults, f)
		} else {
			infra.faults = append(infra.faults, f)
		}
	}
	for i, seq := range plan {
		if len(seq) < 2 || rng.IntN(2) == 0 {
			continue
		}
		layer := &view
		switch {
		case len(view.faults) == 0:
			layer = &infra
		case len(infra.faults) > 0 && rng.IntN(2) == 1:
			layer = &infra
		}
		f := layer.next(rng)
		out[i] = &f
	}
	return out
}

// Sweep is every fault of the menu once, in a seeded order, each
// held while one value that changes a running resource is set, the
// values taken in rounds over the fields (space.InRounds) so that the
// faults meet every section of the spec; the plan's first runs alternate
// with it (Alternate). As Sieve tries each perturbation of a workload
// once, a campaign cut short has still held the faults it learned.
//
// A fault on the resource's own requests (plural: its view, its events,
// its status) takes its value from the fields the starting resource
// (base) holds, when it holds any that change: what such a fault makes
// wrong is the operator's picture of what it already runs, and a field
// the resource lacked shows in an old or coalesced picture only as
// missing, never as an old value written back over the new one.
func Sweep(steps []space.Step, menu []scenario.Fault, seed uint64, plural string, base map[string]any) ([][]space.Step, []*scenario.Fault) {
	var changes, held []space.Step
	for _, st := range steps {
		if st.AtCreation {
			continue
		}
		changes = append(changes, st)
		if !st.Undo && !st.Unset && holds(base, st.Path) {
			held = append(held, st)
		}
	}
	if len(changes) == 0 || len(menu) == 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(seed, 28))
	changes, held = space.InRounds(changes, seed), space.InRounds(held, seed)
	plan, faults := make([][]space.Step, 0, len(menu)), make([]*scenario.Fault, 0, len(menu))
	var n, own int
	for _, i := range rng.Perm(len(menu)) {
		f := menu[i]
		var st space.Step
		if f.Requests != nil && f.Requests.Resource == plural && len(held) > 0 {
			st, own = held[own%len(held)], own+1
		} else {
			st, n = changes[n%len(changes)], n+1
		}
		plan = append(plan, []space.Step{st})
		faults = append(faults, &f)
	}
	return plan, faults
}

// holds says whether obj has a value at path.
func holds(obj map[string]any, path []string) bool {
	_, found, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return found
}

// Alternate puts the sweep's runs between the plan's first ones, one
// each, so that neither the faults nor the single values wait for the
// other.
func Alternate(sweep [][]space.Step, swept []*scenario.Fault, plan [][]space.Step, faults []*scenario.Fault) ([][]space.Step, []*scenario.Fault) {
	outPlan := make([][]space.Step, 0, len(sweep)+len(plan))
	outFaults := make([]*scenario.Fault, 0, len(sweep)+len(plan))
	for i := 0; i < len(sweep) || i < len(plan); i++ {
		if i < len(sweep) {
			outPlan, outFaults = append(outPlan, sweep[i]), append(outFaults, swept[i])
		}
		if i < len(plan) {
			outPlan, outFaults = append(outPlan, plan[i]), append(outFaults, faults[i])
		}
	}
	return outPlan, outFaults
}

// cycle hands out its faults in a seeded order, each once per round.
type cycle struct {
	faults []scenario.Fault
	order  []int
}

func (c *cycle) next(rng *rand.Rand) scenario.Fault {
	if len(c.order) == 0 {
		c.order = rng.Perm(len(c.faults))
	}
	f := c.faults[c.order[0]]
	c.order = c.order[1:]
	return f
}
