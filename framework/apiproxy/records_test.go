package apiproxy

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A write that changes state counts; a refused one, a lease renewal, an
// event and the reviews a metrics scrape makes the operator create do
// not. A refused write is one of an object the API server answered with
// a 4xx, not one a rule injected, nor an exec.
func TestRecords(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	q := func(verb, resource string, status int) Request {
		return Request{At: at, Info: Info{Verb: verb, Resource: resource, Namespace: "ns", Name: "db"}, Status: status}
	}
	g.Expect(q("patch", "statefulsets", 200).StateWrite()).To(BeTrue())
	g.Expect(q("patch", "statefulsets", 409).StateWrite()).To(BeFalse(), "refused")
	g.Expect(q("get", "statefulsets", 200).StateWrite()).To(BeFalse())
	for _, r := range []string{"leases", "events", "tokenreviews", "subjectaccessreviews"} {
		g.Expect(q("create", r, 201).StateWrite()).To(BeFalse(), r)
	}
	exec := q("create", "pods", 400)
	exec.Info.Subresource = "exec"
	injected := q("update", "statefulsets", 500)
	injected.Injected = "api-error"
	reqs := []Request{q("update", "statefulsets", 422), q("update", "statefulsets", 422), q("get", "pods", 404), injected, exec,
		q("delete", "pods", 200), q("delete", "pods", 200), q("delete", "leases", 200), q("create", "services", 201)}
	g.Expect(RefusedWrites(reqs, at)).To(Equal([]string{"update statefulsets ns/db (422)"}))
	g.Expect(RefusedWrites(reqs, at.Add(time.Second))).To(BeEmpty(), "none since a later moment")
	g.Expect(StateWrites(reqs, at)).To(Equal([]string{"delete pods ns/db", "delete pods ns/db", "create services ns/db"}))
	g.Expect(Deletes(reqs, at)).To(Equal(map[string]int{"pods/db": 2}))
}
