package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// deletionOrder watches the resource and the children it controls while
// the resource is deleted, and records when each went.
type deletionOrder struct {
	mu       sync.Mutex
	uid      string
	gone     map[string]time.Time // kind/name -> deleted
	children map[string]bool      // kind/name of objects the resource controls
	stop     []func()
}

// beforeDeletion lists the resource and its children once before the
// resource is deleted: the children it owns then are the ones the release
// oracle judges writes to (view runs), and with the children-first
// assertion the listing starts the watches that record the deletion's
// order.
func (r *run) beforeDeletion(ctx context.Context) (order *deletionOrder, owned map[string]bool) {
	watch := r.s.Spec.Assertions.Deletion != nil && r.s.Spec.Assertions.Deletion.ChildrenFirst
	if !watch && r.e.view == nil {
		return nil, nil
	}
	// The owned set is best effort (a kind the operator may not list is
	// left out of it); the order check needs every kind watched.
	before, err := compare.List(ctx, r.e.Dynamic, r.ns, append([]schema.GroupVersionResource{r.gvr}, compare.ChildResources...)...)
	owned = before.OwnedBy(string(r.obj.GetUID()))
	if watch && err == nil {
		order, err = r.watchDeletion(ctx, before)
	}
	if watch && err != nil {
		r.res.Errors = append(r.res.Errors, "cleanup: "+err.Error())
	}
	return order, owned
}

// watchDeletion starts a watch of each kind listed, from its list.
func (r *run) watchDeletion(ctx context.Context, listed compare.Listing) (*deletionOrder, error) {
	d := &deletionOrder{uid: string(r.obj.GetUID()), gone: map[string]time.Time{}, children: map[string]bool{}}
	for _, l := range listed {
		for i := range l.List.Items {
			d.note(&l.List.Items[i])
		}
		w, err := r.e.Dynamic.Resource(l.Resource).Namespace(r.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.List.GetResourceVersion()})
		if err != nil {
			d.close()
			return nil, fmt.Errorf("watching %s: %w", l.Resource.Resource, err)
		}
		d.stop = append(d.stop, w.Stop)
		go d.follow(w)
	}
	return d, nil
}

func (d *deletionOrder) note(u *unstructured.Unstructured) {
	ref := metav1.GetControllerOf(u)
	if ref != nil && string(ref.UID) == d.uid {
		d.mu.Lock()
		d.children[u.GetKind()+"/"+u.GetName()] = true
		d.mu.Unlock()
	}
}

func (d *deletionOrder) follow(w watch.Interface) {
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		d.note(u)
		if ev.Type == watch.Deleted {
			d.mu.Lock()
			d.gone[u.GetKind()+"/"+u.GetName()] = time.Now()
			d.mu.Unlock()
		}
	}
}

func (d *deletionOrder) close() {
	for _, s := range d.stop {
		s()
	}
}

// judge checks that every child went before the resource (key).
func (d *deletionOrder) judge(key string) report.Check {
	d.close()
	d.mu.Lock()
	defer d.mu.Unlock()
	c := report.Check{Kind: "operator", Name: "children deleted before the resource", Value: "in order", Budget: "every child first"}
	resGone, ok := d.gone[key]
	if !ok {
		c.Value, c.Violation = "not seen", "the resource's deletion was not seen by the watch"
		return c
	}
	var late []string
	for _, child := range slices.Sorted(maps.Keys(d.children)) {
		at, gone := d.gone[child]
		switch {
		case !gone:
			late = append(late, child+" still there")
		case at.After(resGone):
			late = append(late, fmt.Sprintf("%s outlived it by %s", child, at.Sub(resGone).Round(time.Millisecond)))
		}
	}
	if len(late) > 0 {
		c.Value = strings.Join(late, "; ")
		c.Violation = "the resource went before its children (its finalizer was released before the cleanup it guards): " + c.Value
	}
	return c
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
