package faultplan

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// Writes are the kinds of write the operator made through the API proxy
// since a moment and, unless until is zero, until another (reqs as the
// proxy recorded them): the verbs it wrote each child resource with, in
// the order first made, and whether it wrote the status of plural, the
// resource under test.
func Writes(reqs []apiproxy.Request, since, until time.Time, plural string) (verbs map[string][]string, status bool) {
	verbs = map[string][]string{}
	for _, q := range reqs {
		if q.At.Before(since) || !until.IsZero() && q.At.After(until) || !q.StateWrite() {
			continue
		}
		switch {
		case q.Info.Resource == plural && q.Info.Subresource == "status":
			status = true
		case q.Info.Resource != plural && q.Info.Subresource == "" && !slices.Contains(verbs[q.Info.Resource], q.Info.Verb):
			verbs[q.Info.Resource] = append(verbs[q.Info.Resource], q.Info.Verb)
		}
	}
	return verbs, status
}

// NewKills are the kills right after each kind of write in run that
// known (the reference run's) lacks, held for hold: Sieve's intermediate
// states, the operator restarted between two writes of a change it makes
// only when asked (a StatefulSet deleted to be made again with bigger
// claims), which a menu learned from the reference run cannot hold.
func NewKills(known, run map[string][]string, hold time.Duration) []scenario.Fault {
	var out []scenario.Fault
	for _, res := range slices.Sorted(maps.Keys(run)) {
		for _, verb := range run[res] {
			if slices.Contains(known[res], verb) {
				continue
			}
			out = append(out, KillAfter(verb, res, hold))
		}
	}
	return out
}

// KillAfter kills the operator right after its first write verb of res
// in the hold, and starts it again.
func KillAfter(verb, res string, hold time.Duration) scenario.Fault {
	return scenario.Fault{Action: scenario.ActionKillAfterWrite, Target: Operator, After: 1, Hold: metav1.Duration{Duration: hold},
		Requests: &scenario.RequestMatch{Verb: verb, Resource: res}}
}

// Operator is the role a campaign's view faults target.
const Operator = "operator"
