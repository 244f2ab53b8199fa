package apiproxy

import (
	"fmt"
	"slices"
	"time"
)

// NotState are resources an operator creates that change no state:
// leader election's lease, events, and the reviews its metrics
// endpoint's authentication and authorization create on every scrape.
var NotState = []string{"leases", "events", "tokenreviews", "subjectaccessreviews",
	"selfsubjectaccessreviews", "localsubjectaccessreviews", "selfsubjectreviews", "selfsubjectrulesreviews"}

// StateWrite says whether the request is a successful write that changes
// what is (Leases and Events aside).
func (q Request) StateWrite() bool {
	return q.Status/100 == 2 && writeVerbs[q.Info.Verb] && !slices.Contains(NotState, q.Info.Resource)
}

// RefusedWrite says whether the request is a write of an object (or its
// status) that the API server refused: a 4xx it answered, not one a rule
// injected. An exec or a port-forward is no write of state.
func (q Request) RefusedWrite() bool {
	return q.Injected == "" && q.Status/100 == 4 && writeVerbs[q.Info.Verb] && !slices.Contains(NotState, q.Info.Resource) &&
		(q.Info.Subresource == "" || q.Info.Subresource == "status")
}

// StateWrites are the state writes among reqs since then, each as the
// request reads.
func StateWrites(reqs []Request, since time.Time) []string {
	var out []string
	for _, q := range reqs {
		if !q.At.Before(since) && q.StateWrite() {
			out = append(out, q.Info.String())
		}
	}
	return out
}

// RefusedWrites are the refused writes among reqs since then, each
// request once, with the status answered.
func RefusedWrites(reqs []Request, since time.Time) []string {
	var out []string
	for _, q := range reqs {
		if w := fmt.Sprintf("%s (%d)", q.Info, q.Status); !q.At.Before(since) && q.RefusedWrite() && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// Deletes counts the successful deletes of objects (not a subresource,
// nor what NotState lists) among reqs since then, by resource and name.
func Deletes(reqs []Request, since time.Time) map[string]int {
	out := map[string]int{}
	for _, q := range reqs {
		if !q.At.Before(since) && q.Status/100 == 2 && q.Info.Verb == "delete" && q.Info.Subresource == "" && !slices.Contains(NotState, q.Info.Resource) {
			out[q.Info.Resource+"/"+q.Info.Name]++
		}
	}
	return out
}
