package engine

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// Once the operator takes the last finalizer off a deleted resource, the
// resource is gone: writing its children after that (Sieve's zk-410, a
// pass that goes on to the ConfigMap after its finalizer step) is a
// violation; what it writes before, deletes, and objects the resource
// does not own (a pod labelled again by a pass on a stale cache) are not.
func TestReleasedWrites(t *testing.T) {
	g := NewWithT(t)
	deleted := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return deleted.Add(time.Duration(s) * time.Second) }
	req := func(s int, verb, resource, name, sub string, status int) apiproxy.Request {
		return apiproxy.Request{At: at(s), Took: 100 * time.Millisecond, Status: status,
			Info: apiproxy.Info{Verb: verb, Resource: resource, Namespace: "ns", Name: name, Subresource: sub}}
	}
	pass := []apiproxy.Request{
		req(-5, "update", "configmaps", "zk", "", 200),                   // before the deletion
		req(1, "patch", "statefulsets", "zk", "", 200),                   // while the finalizer still holds
		req(2, "update", "zookeeperclusters", "zk", "", 200),             // the finalizer taken off: released
		req(2, "update", "configmaps", "zk", "", 200),                    // began before the release ended
		req(3, "update", "configmaps", "zk", "", 200),                    // after: for nothing
		req(3, "update", "zookeeperclusters", "zk", "status", 404),       // the resource's own status: gone
		req(4, "delete", "persistentvolumeclaims", "data-zk-0", "", 200), // removing what is left
		req(4, "create", "services", "zk-client", "", 201),
		req(5, "update", "configmaps", "elsewhere", "", 200),
		req(6, "create", "leases", "zk-lock", "", 201), // leader election
		req(6, "update", "pods", "zk-0", "", 200),      // not the resource's own
	}
	owned := map[string]bool{"configmaps/zk": true, "statefulsets/zk": true, "services/zk-client": true, "persistentvolumeclaims/data-zk-0": true}
	pass[8].Info.Namespace = "operator-system"
	writes, where := releasedWrites(pass, "ns", "zookeeperclusters", "zk", deleted, owned)
	g.Expect(writes).To(Equal([]string{"update configmaps ns/zk", "create services ns/zk-client"}))
	g.Expect(where).To(Equal("configmaps/zk"))

	fixed := []apiproxy.Request{pass[1], pass[2], pass[6]}
	writes, _ = releasedWrites(fixed, "ns", "zookeeperclusters", "zk", deleted, owned)
	g.Expect(writes).To(BeEmpty(), "the pass ends at its finalizer step")

	noFinalizer := []apiproxy.Request{pass[4], pass[7]}
	writes, _ = releasedWrites(noFinalizer, "ns", "zookeeperclusters", "zk", deleted, owned)
	g.Expect(writes).To(BeEmpty(), "never released by the operator: not judged")

	again := append(append([]apiproxy.Request{}, pass[:5]...), req(4, "patch", "zookeeperclusters", "zk", "", 200))
	writes, _ = releasedWrites(again, "ns", "zookeeperclusters", "zk", deleted, owned)
	g.Expect(writes).To(BeEmpty(), "a later write of the resource succeeded: it still held, and that one released it")
}
