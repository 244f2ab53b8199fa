package apiproxy

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// NotState are resources an operator creates that change no state:
// leader election's lease, events, and the reviews its metrics
// endpoint's authentication and authorization create on every scrape.
var NotState = []string{"leases", "events", "tokenreviews", "subjectaccessreviews",
	"selfsubjectaccessreviews", "localsubjectaccessreviews", "selfsubjectreviews", "selfsubjectrulesreviews"}

// StateWrite says whether the request is a successful write that changes
// what is (Leases, other leader-election locks, Events and writes that
// changed nothing aside).
func (q Request) StateWrite() bool {
	return q.Status/100 == 2 && writeVerbs[q.Info.Verb] && !slices.Contains(NotState, q.Info.Resource) && !q.Lock && !q.NoOp
}

// RefusedWrite says whether the request is a write of an object (or its
// status) that the API server refused: a 4xx it answered, not one a rule
// injected. An exec or a port-forward is no write of state.
func (q Request) RefusedWrite() bool {
	return q.Injected == "" && q.Status/100 == 4 && writeVerbs[q.Info.Verb] && !slices.Contains(NotState, q.Info.Resource) && !q.Lock &&
		(q.Info.Subresource == "" || q.Info.Subresource == "status")
}

// lockResources hold leader-election records in an annotation
// (resourcelock's ConfigMap and Endpoints locks, still used by operators
// built on older client-go).
var lockResources = map[string]bool{"configmaps": true, "endpoints": true}

// isLockWrite says whether r writes a leader-election record: a create,
// update or patch of a ConfigMap or Endpoints whose body carries the
// record's annotation. The body is read and put back for forwarding; the
// annotation's key is found in JSON and protobuf bodies alike.
func isLockWrite(r *http.Request, info Info) bool {
	if !lockResources[info.Resource] || info.Subresource != "" || r.Body == nil ||
		(info.Verb != "create" && info.Verb != "update" && info.Verb != "patch") {
		return false
	}
	body, err := peekBody(r)
	return err == nil && bytes.Contains(body, []byte(resourcelock.LeaderElectionRecordAnnotationKey))
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
