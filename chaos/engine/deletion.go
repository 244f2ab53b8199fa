package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/teardown"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// beforeDeletion lists the resource and its children once before the
// resource is deleted and watches them from that listing (the teardown
// oracles); the children it owns then are the ones the release oracle
// judges writes to (view runs). The listing is best effort (a kind the
// operator may not list is left out of it); the children-first
// assertion needs every kind watched.
func (r *run) beforeDeletion(ctx context.Context) (w *teardown.Watch, owned map[string]bool) {
	before, err := compare.List(ctx, r.e.Dynamic, r.ns, append([]schema.GroupVersionResource{r.gvr}, compare.ChildResources...)...)
	owned = before.OwnedBy(string(r.obj.GetUID()))
	if err != nil && r.childrenFirst() {
		r.res.Errors = append(r.res.Errors, "cleanup: "+err.Error())
		return nil, owned
	}
	if w, err = teardown.Start(ctx, r.e.Dynamic, r.ns, r.obj, before); err != nil {
		r.res.Errors = append(r.res.Errors, "cleanup: "+err.Error())
	}
	return w, owned
}

func (r *run) childrenFirst() bool {
	return r.s.Spec.Assertions.Deletion != nil && r.s.Spec.Assertions.Deletion.ChildrenFirst
}

// leakable are the kinds nothing may be left of once the resource is
// deleted: its children's but claims, which the StatefulSet's retention
// policy keeps or not.
var leakable = slices.DeleteFunc(slices.Clone(compare.ChildResources), func(gvr schema.GroupVersionResource) bool {
	return gvr.Resource == "persistentvolumeclaims"
})

// collectedWithin is how long the garbage collector gets to remove a
// deleted resource's children: it acts within seconds on an idle API
// server, and a child still there after half a minute was never owned.
const collectedWithin = 30 * time.Second

// leftAfterDeletion checks, once the resource is gone, that its namespace
// holds none of the objects an operator makes (Pods and claims aside: the
// StatefulSet's retention policy decides those): what is left leaked.
// Garbage collection gets collectedWithin to remove children with owner references.
func (r *run) leftAfterDeletion(ctx context.Context) {
	// left is the last complete listing: a poll whose list failed keeps
	// the one before, so the violation names what was left.
	var left []string
	err := framework.PollFor(ctx, "the resource's children to be collected", collectedWithin, time.Second, func(ctx context.Context) (bool, string, error) {
		children, err := compare.List(ctx, r.e.Dynamic, r.ns, leakable...)
		if err != nil {
			return false, err.Error(), nil
		}
		var now []string
		children.Each(func(_ schema.GroupVersionResource, key string, c *unstructured.Unstructured) {
			now = append(now, key+ownersOf(c))
		})
		left = now
		return len(left) == 0, fmt.Sprint(left), nil
	})
	c := report.Check{Kind: "operator", Name: "nothing left once the resource is deleted", Value: "nothing", Budget: "nothing after 30s"}
	if err != nil {
		c.Value = strings.Join(left, ", ")
		if len(left) == 0 {
			c.Value = err.Error() // no listing ever completed
		}
		c.Violation = "left behind after the resource was deleted (leaked): " + c.Value
		r.res.Violations = append(r.res.Violations, c.Violation)
	}
	r.res.Checks = append(r.res.Checks, c)
}

func ownersOf(u *unstructured.Unstructured) string {
	refs := u.GetOwnerReferences()
	if len(refs) == 0 {
		return " (no owner reference)"
	}
	var owners []string
	for _, o := range refs {
		owners = append(owners, o.Kind+"/"+o.Name)
	}
	return " (owned by " + strings.Join(owners, ", ") + ")"
}

// writesAfterRelease checks that the operator writes none of the
// resource's own children (those with an owner reference to it when it
// was deleted) once it has taken the resource's last finalizer off (its
// last successful write to the resource after the harness deleted it):
// from that moment the resource is gone, so a child re-created then is
// one the garbage collector removes, and an update races it. A pass that
// goes on from its finalizer step to the children is the bug. Other
// writes are not judged: a second pass on a cache that still shows the
// finalizer may redo the deletion's own steps (labelling pods), which is
// harmless.
func (r *run) writesAfterRelease(deleted time.Time, owned map[string]bool) {
	writes, where := releasedWrites(r.e.view.Proxy.Requests(), r.ns, r.gvr.Resource, r.obj.GetName(), deleted, owned)
	c := report.Check{Kind: "operator", Name: "no write once the resource is released", Value: "none",
		Budget: "none of its children after its last finalizer is removed", Where: where}
	if len(writes) > 0 {
		c.Value = fmt.Sprintf("%d writes", len(writes))
		c.Violation = fmt.Sprintf("the operator wrote children of %s %s after it removed its last finalizer, when it was gone: %s",
			r.obj.GetKind(), r.obj.GetName(), strings.Join(writes, ", "))
		r.res.Violations = append(r.res.Violations, c.Violation)
	}
	r.res.Checks = append(r.res.Checks, c)
}

// releasedWrites finds, among the operator's requests since the resource
// was deleted, its last successful write to the resource itself (the
// release) and the writes of owned objects (by "<resource>/<name>") in
// namespace ns that began after it ended (deletes aside: removing what is
// left is no harm). where is the first such write's resource and name.
func releasedWrites(reqs []apiproxy.Request, ns, resource, name string, deleted time.Time, owned map[string]bool) (writes []string, where string) {
	var released time.Time
	for _, q := range reqs {
		if q.At.Before(deleted) || !q.StateWrite() || q.Info.Namespace != ns {
			continue
		}
		if q.Info.Resource == resource && q.Info.Name == name {
			if q.Info.Subresource == "" && q.Info.Verb != "delete" {
				released, writes, where = q.At.Add(q.Took), nil, ""
			}
			continue
		}
		key := q.Info.Resource + "/" + q.Info.Name
		if released.IsZero() || !q.At.After(released) || q.Info.Verb == "delete" || q.Info.Verb == "deletecollection" || !owned[key] {
			continue
		}
		if where == "" {
			where = key
		}
		writes = append(writes, q.Info.String())
	}
	return writes, where
}
