package faultplan

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// The writes between two moments are the verbs per child resource, in
// the order first made, and whether the resource's status was written;
// refused writes, reads and writes outside the moments are left out.
func TestWrites(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	q := func(verb, res, sub string, status int, when time.Time) apiproxy.Request {
		return apiproxy.Request{At: when, Info: apiproxy.Info{Verb: verb, Resource: res, Subresource: sub}, Status: status}
	}
	reqs := []apiproxy.Request{
		q("create", "services", "", 201, at.Add(-time.Second)),
		q("create", "statefulsets", "", 201, at), q("patch", "statefulsets", "", 200, at), q("create", "statefulsets", "", 201, at),
		q("update", "rabbitmqclusters", "status", 200, at), q("update", "rabbitmqclusters", "", 200, at),
		q("delete", "configmaps", "", 409, at), q("get", "pods", "", 200, at),
	}
	verbs, status := Writes(reqs, at, time.Time{}, "rabbitmqclusters")
	g.Expect(verbs).To(Equal(map[string][]string{"statefulsets": {"create", "patch"}}))
	g.Expect(status).To(BeTrue())
	_, status = Writes(reqs[:4], at, time.Time{}, "rabbitmqclusters")
	g.Expect(status).To(BeFalse())
	deleted := q("delete", "statefulsets", "", 200, at.Add(time.Minute))
	verbs, _ = Writes(append(reqs, deleted), at, at.Add(time.Second), "rabbitmqclusters")
	g.Expect(verbs).To(Equal(map[string][]string{"statefulsets": {"create", "patch"}}), "none after until (a deletion's writes)")
}

// A run's kinds of write the reference run never made each get a kill
// right after it; those it made get none.
func TestNewKills(t *testing.T) {
	g := NewWithT(t)
	known := map[string][]string{"statefulsets": {"create", "patch"}, "services": {"create"}}
	run := map[string][]string{"statefulsets": {"patch", "delete"}, "persistentvolumeclaims": {"update"}, "services": {"create"}}
	kills := NewKills(known, run, 15*time.Second)
	g.Expect(kills).To(HaveLen(2))
	g.Expect(kills[0].Requests).To(Equal(&scenario.RequestMatch{Verb: "update", Resource: "persistentvolumeclaims"}))
	g.Expect(kills[1].Requests).To(Equal(&scenario.RequestMatch{Verb: "delete", Resource: "statefulsets"}))
	g.Expect(kills[1].Action).To(Equal(scenario.ActionKillAfterWrite))
	g.Expect(kills[1].Target).To(Equal(Operator))
	g.Expect(kills[1].After).To(Equal(1))
	g.Expect(NewKills(known, known, time.Second)).To(BeEmpty())
}
