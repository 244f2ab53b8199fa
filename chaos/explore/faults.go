package explore

import (
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/faultplan"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// How long the fault menu's faults hold. menuHold covers a step's writes
// (a step converges within seconds on envtest) with room for the
// operator's retries; menuRestartHold, a restart onto an old view or an
// expired watch, whose effect is over once the operator has re-listed.
const (
	menuHold        = 15 * time.Second
	menuRestartHold = 10 * time.Second
)

// learnFaults makes the campaign's fault menu (faultMenu) from the
// reference run's writes since refStart, and keeps those it made until it
// converged, which the follow-up kills compare a run's with. With no API
// proxy (no view faults) the menu is empty.
func (c *campaign) learnFaults(refStart, converged time.Time, ref *compare.State) []scenario.Fault {
	reqs, viewed := c.e.Requests()
	if !viewed {
		return nil
	}
	verbs, status := faultplan.Writes(reqs, refStart, time.Time{}, ref.Plural)
	c.refWrites, _ = faultplan.Writes(reqs, refStart, converged, ref.Plural)
	c.plural = ref.Plural
	var menu []scenario.Fault
	menu, c.roles = faultMenu(c.e.OnEnvtest(), verbs, status, ref, c.base.Spec.Roles)
	return menu
}

// faultMenu are the faults a campaign may hold while a sequence's steps
// run, made from what the operator wrote in the reference run (verbs by
// child resource, and whether it wrote the status: faultplan.Writes): a
// conflict on its status writes, the resource's own changes coalesced,
// errors, a kill right after a write and coalesced events on each kind
// of child it wrote, a restart onto a view as of the resource's creation,
// and, where it holds a finalizer, as of its deletion after a recreate,
// and expired watches; a pod kill of the first member of each StatefulSet
// the resource owns (on envtest, made again only at the heal) and, on a
// cluster, of each role the base scenario names. Nothing in it is known
// of the operator beforehand. It returns the roles its faults target that
// the base does not define, for the scenarios that hold them.
func faultMenu(onEnvtest bool, verbs map[string][]string, status bool, ref *compare.State, roles map[string]scenario.Role) ([]scenario.Fault, map[string]scenario.Role) {
	plural := ref.Plural
	added := map[string]scenario.Role{faultplan.Operator: {Operator: true}}
	hold := func(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
	var menu []scenario.Fault
	if status {
		menu = append(menu, scenario.Fault{Action: scenario.ActionAPIError, Target: faultplan.Operator, Status: 409, Hold: hold(menuHold),
			Requests: &scenario.RequestMatch{Resource: plural, Subresource: "status", Probability: 0.5}})
	}
	// Sieve's unobserved state of the resource itself: the changes made
	// in the hold reach the operator as one, the last.
	menu = append(menu, scenario.Fault{Action: scenario.ActionWatchCoalesce, Target: faultplan.Operator, Hold: hold(menuHold),
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
			scenario.Fault{Action: scenario.ActionAPIError, Target: faultplan.Operator, Status: 500, Hold: hold(menuHold),
				Requests: &scenario.RequestMatch{Verb: verb, Resource: res, Count: 3}},
			faultplan.KillAfter(verb, res, menuHold),
			scenario.Fault{Action: scenario.ActionWatchCoalesce, Target: faultplan.Operator, Hold: hold(menuHold),
				Requests: &scenario.RequestMatch{Resource: res}})
	}
	if ref.Finalized {
		// Sieve's recreate: the resource deleted and created again, the
		// operator restarted onto a view as of the old one's deletion. It
		// needs a finalizer, which keeps the old one visibly deleting.
		menu = append(menu, scenario.Fault{Action: scenario.ActionStaleView, Target: faultplan.Operator, StaleFrom: scenario.StaleFromDeleted,
			Restart: true, Hold: hold(menuHold), Requests: &scenario.RequestMatch{Resource: plural}})
	}
	menu = append(menu,
		scenario.Fault{Action: scenario.ActionStaleView, Target: faultplan.Operator, StaleFrom: "created", Restart: true, Hold: hold(menuRestartHold),
			Requests: &scenario.RequestMatch{Resource: plural}},
		scenario.Fault{Action: scenario.ActionWatchClose, Target: faultplan.Operator, Expire: true, Hold: hold(menuRestartHold),
			Requests: &scenario.RequestMatch{Namespace: "*"}})
	for name, role := range firstMembers(ref) {
		if _, taken := roles[name]; !taken {
			added[name] = role
			menu = append(menu, scenario.Fault{Action: scenario.ActionPodKill, Target: name, Hold: hold(menuHold)})
		}
	}
	if !onEnvtest {
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
