package engine

import (
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/explore"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// operatorRole is the role a campaign's view faults target.
const operatorRole = "operator"

// How long the fault menu's faults hold. menuHold covers a step's writes
// (a step converges within seconds on envtest) with room for the
// operator's retries; menuRestartHold, a restart onto an old view or an
// expired watch, whose effect is over once the operator has re-listed.
const (
	menuHold        = 15 * time.Second
	menuRestartHold = 10 * time.Second
)

// faultMenu are the faults a campaign may hold while a sequence's steps
// run, made from what the operator did since a moment (the reference
// run): a conflict on its status writes, the resource's own changes
// coalesced, errors, a kill right after a write and coalesced events on
// each kind of child it wrote, a restart
// onto a view as of the resource's creation, and, where it holds a
// finalizer, as of its deletion after a recreate, and expired watches;
// a pod kill of the first member of each StatefulSet the resource owns
// (on envtest, made again only at the heal) and, on a cluster, of each
// role the base scenario names. Nothing in it is known of the operator
// beforehand. It returns the roles its faults target that the base does
// not define, for the scenarios that hold them.
func (e *Engine) faultMenu(since time.Time, ref *compare.State, roles map[string]scenario.Role) ([]scenario.Fault, map[string]scenario.Role) {
	plural := ref.Plural
	if e.view == nil {
		return nil, nil
	}
	added := map[string]scenario.Role{operatorRole: {Operator: true}}
	verbs := map[string][]string{}
	status := false
	for _, q := range e.view.proxy.Requests() {
		if q.At.Before(since) || !q.StateWrite() {
			continue
		}
		switch {
		case q.Info.Resource == plural && q.Info.Subresource == "status":
			status = true
		case q.Info.Resource != plural && q.Info.Subresource == "" && !slices.Contains(verbs[q.Info.Resource], q.Info.Verb):
			verbs[q.Info.Resource] = append(verbs[q.Info.Resource], q.Info.Verb)
		}
	}
	hold := func(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
	var menu []scenario.Fault
	if status {
		menu = append(menu, scenario.Fault{Action: scenario.ActionAPIError, Target: operatorRole, Status: 409, Hold: hold(menuHold),
			Requests: &scenario.RequestMatch{Resource: plural, Subresource: "status", Probability: 0.5}})
	}
	// Sieve's unobserved state of the resource itself: the changes made
	// in the hold reach the operator as one, the last.
	menu = append(menu, scenario.Fault{Action: scenario.ActionWatchCoalesce, Target: operatorRole, Hold: hold(menuHold),
		Requests: &scenario.RequestMatch{Resource: plural}})
	for _, res := range slices.Sorted(maps.Keys(verbs)) {
		verb := verbs[res][0]
		for _, v := range []string{"patch", "update"} {
			if slices.Contains(verbs[res], v) {
				verb = v
				break
			}
		}
		menu = append(menu,
			scenario.Fault{Action: scenario.ActionAPIError, Target: operatorRole, Status: 500, Hold: hold(menuHold),
				Requests: &scenario.RequestMatch{Verb: verb, Resource: res, Count: 3}},
			scenario.Fault{Action: scenario.ActionKillAfterWrite, Target: operatorRole, After: 1, Hold: hold(menuHold),
				Requests: &scenario.RequestMatch{Verb: verb, Resource: res}},
			scenario.Fault{Action: scenario.ActionWatchCoalesce, Target: operatorRole, Hold: hold(menuHold),
				Requests: &scenario.RequestMatch{Resource: res}})
	}
	if ref.Finalized {
		// Sieve's recreate: the resource deleted and created again, the
		// operator restarted onto a view as of the old one's deletion. It
		// needs a finalizer, which keeps the old one visibly deleting.
		menu = append(menu, scenario.Fault{Action: scenario.ActionStaleView, Target: operatorRole, StaleFrom: scenario.StaleFromDeleted,
			Restart: true, Hold: hold(menuHold), Requests: &scenario.RequestMatch{Resource: plural}})
	}
	menu = append(menu,
		scenario.Fault{Action: scenario.ActionStaleView, Target: operatorRole, StaleFrom: "created", Restart: true, Hold: hold(menuRestartHold),
			Requests: &scenario.RequestMatch{Resource: plural}},
		scenario.Fault{Action: scenario.ActionWatchClose, Target: operatorRole, Expire: true, Hold: hold(menuRestartHold),
			Requests: &scenario.RequestMatch{Namespace: "*"}})
	for name, role := range firstMembers(ref) {
		if _, taken := roles[name]; !taken {
			added[name] = role
			menu = append(menu, scenario.Fault{Action: scenario.ActionPodKill, Target: name, Hold: hold(menuHold)})
		}
	}
	if e.host == nil {
		for _, name := range slices.Sorted(maps.Keys(roles)) {
			if r := roles[name]; !r.Operator && !r.APIServer {
				menu = append(menu, scenario.Fault{Action: scenario.ActionPodKill, Target: name, Hold: hold(menuHold)})
			}
		}
	}
	return menu, added
}

// firstMembers are roles of the first pod (ordinal 0) of each StatefulSet
// the resource owns, by the pod-name label the StatefulSet controller
// sets, in the order of their sets' names: the member that bootstraps a
// set, and the one an operator most often addresses by name.
func firstMembers(ref *compare.State) iter.Seq2[string, scenario.Role] {
	return func(yield func(string, scenario.Role) bool) {
		for _, child := range slices.Sorted(maps.Keys(ref.Children)) {
			kind, set, _ := strings.Cut(child, "/")
			if kind != "StatefulSet" {
				continue
			}
			pod := set + "-0"
			if !yield(pod, scenario.Role{Pods: map[string]string{appsv1.StatefulSetPodNameLabel: pod}}) {
				return
			}
		}
	}
}

// faultsFor draws, with the seed, which of the plan's sequences run
// under a fault from menu: half of those of two steps or more; single
// steps run without one (they teach the consistency oracle and judge each
// value alone). When the menu holds faults of both layers, view faults
// through the API proxy and Chaos Mesh faults on the cluster, each
// faulted sequence first draws its layer, so that a menu of many view
// faults and a few pod kills still gives each layer half the sequences.
// Within a layer the faults come in a seeded order, each once before any
// twice, so that a short campaign holds as many different faults as it
// can.
func faultsFor(plan [][]explore.Step, menu []scenario.Fault, seed uint64) []*scenario.Fault {
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

// faultSweep is every fault of the menu once, in a seeded order, each
// held while one value that changes a running resource is set, the
// values taken in rounds over the fields (explore.InRounds) so that the
// faults meet every section of the spec; the plan's first runs alternate
// with it (alternate). As Sieve tries each perturbation of a workload
// once, a campaign cut short has still held the faults it learned.
func faultSweep(steps []explore.Step, menu []scenario.Fault, seed uint64) ([][]explore.Step, []*scenario.Fault) {
	var changes []explore.Step
	for _, st := range steps {
		if !st.AtCreation {
			changes = append(changes, st)
		}
	}
	if len(changes) == 0 || len(menu) == 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(seed, 28))
	changes = explore.InRounds(changes, seed)
	plan, faults := make([][]explore.Step, 0, len(menu)), make([]*scenario.Fault, 0, len(menu))
	for n, i := range rng.Perm(len(menu)) {
		f := menu[i]
		plan = append(plan, []explore.Step{changes[n%len(changes)]})
		faults = append(faults, &f)
	}
	return plan, faults
}

// alternate puts the sweep's runs between the plan's first ones, one
// each, so that neither the faults nor the single values wait for the
// other.
func alternate(sweep [][]explore.Step, swept []*scenario.Fault, plan [][]explore.Step, faults []*scenario.Fault) ([][]explore.Step, []*scenario.Fault) {
	outPlan := make([][]explore.Step, 0, len(sweep)+len(plan))
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
