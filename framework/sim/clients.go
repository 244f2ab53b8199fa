package sim

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// ErrCrashed is what every call returns once a simulated crash happened.
var ErrCrashed = errors.New("sim: the reconciler crashed (simulated)")

// change is one write seen by the world: old and new states (nil for
// create or delete).
type change struct {
	old, new client.Object
}

// eventingClient emits a change for every write, so that the world's watches
// can turn it into reconcile requests.
type eventingClient struct {
	client.Client
	emit func(change)
	// current reads the state before a write (the runner's view).
	current client.Reader
}

func (c *eventingClient) before(ctx context.Context, obj client.Object) client.Object {
	old := obj.DeepCopyObject().(client.Object)
	r := c.current
	if r == nil {
		r = c.Client
	}
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), old); err != nil {
		return nil
	}
	return old
}

func (c *eventingClient) after(ctx context.Context, old, obj client.Object) {
	cur := obj.DeepCopyObject().(client.Object)
	// Read from the API itself (the eventing client reads through to the
	// fake; the runner's view is older than this write).
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		cur = nil // deleted
	}
	c.afterState(old, cur)
}

func (c *eventingClient) afterState(old, cur client.Object) {
	if old == nil && cur == nil {
		return
	}
	if old != nil && cur != nil && old.GetResourceVersion() == cur.GetResourceVersion() {
		return // no change, no event
	}
	c.emit(change{old: old, new: cur})
}

func (c *eventingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	if err == nil {
		c.after(ctx, nil, obj)
	}
	return err
}

func (c *eventingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	old := c.before(ctx, obj)
	err := c.Client.Update(ctx, obj, opts...)
	c.after(ctx, old, obj)
	return err
}

// Patch reads the result back: a patch that removes the last finalizer of a
// deleted object deletes it, which the response does not say.
func (c *eventingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	old := c.before(ctx, obj)
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.after(ctx, old, obj)
	return err
}

func (c *eventingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	old := c.before(ctx, obj)
	err := c.Client.Delete(ctx, obj, opts...)
	c.after(ctx, old, obj)
	return err
}

func (c *eventingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	target, err := c.applyTarget(obj)
	if err != nil {
		return c.Client.Apply(ctx, obj, opts...)
	}
	old := c.before(ctx, target)
	err = c.Client.Apply(ctx, obj, opts...)
	c.after(ctx, old, target)
	return err
}

// applyTarget builds an empty typed object for an apply configuration's kind and key.
func (c *eventingClient) applyTarget(obj runtime.ApplyConfiguration) (client.Object, error) {
	type named interface {
		GetAPIVersion() *string
		GetKind() *string
		GetName() *string
		GetNamespace() *string
	}
	n, ok := obj.(named)
	if !ok || n.GetKind() == nil || n.GetAPIVersion() == nil || n.GetName() == nil {
		return nil, errors.New("not a named apply configuration")
	}
	gv, err := schema.ParseGroupVersion(*n.GetAPIVersion())
	if err != nil {
		return nil, err
	}
	ro, err := c.Scheme().New(gv.WithKind(*n.GetKind()))
	if err != nil {
		return nil, err
	}
	o := ro.(client.Object)
	o.SetName(*n.GetName())
	if ns := n.GetNamespace(); ns != nil {
		o.SetNamespace(*ns)
	}
	return o, nil
}

func (c *eventingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *eventingClient) SubResource(sub string) client.SubResourceClient {
	return &eventingSubResource{SubResourceClient: c.Client.SubResource(sub), parent: c}
}

type eventingSubResource struct {
	client.SubResourceClient
	parent *eventingClient
}

func (s *eventingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	old := s.parent.before(ctx, obj)
	err := s.SubResourceClient.Update(ctx, obj, opts...)
	s.parent.after(ctx, old, obj)
	return err
}

func (s *eventingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	old := s.parent.before(ctx, obj)
	err := s.SubResourceClient.Patch(ctx, obj, patch, opts...)
	s.parent.after(ctx, old, obj)
	return err
}

// faultyClient is the reconciler's view of the API during one reconcile:
// reads may come from a stale snapshot, one call may fail, and after a
// crash every call fails.
type faultyClient struct {
	client.Client
	// stale serves reads when set.
	stale client.Reader
	fault Fault
	// calls counts calls per verb; writes counts writes.
	calls   map[string]int
	writes  int
	crashed bool
}

func (c *faultyClient) check(verb string) error {
	if c.crashed {
		return ErrCrashed
	}
	c.calls[verb]++
	if c.fault.Kind == APIError && c.fault.Verb == verb && c.fault.Nth == c.calls[verb] {
		return apiError(c.fault.Err)
	}
	return nil
}

// write counts a write; a Crash fault lets CrashAfter writes through, then
// crashes before the next one.
func (c *faultyClient) write(verb string) error {
	if err := c.check(verb); err != nil {
		return err
	}
	if c.fault.Kind == Crash && c.writes >= c.fault.CrashAfter {
		c.crashed = true
		return ErrCrashed
	}
	c.writes++
	return nil
}

func apiError(k APIErrorKind) error {
	gr := schema.GroupResource{Resource: "sim"}
	switch k {
	case Conflict:
		return apierrors.NewConflict(gr, "object", errors.New("injected by gauntlet sim"))
	case Timeout:
		return apierrors.NewServerTimeout(gr, "request", 1)
	case TooManyRequests:
		return apierrors.NewTooManyRequests("injected by gauntlet sim", 1)
	default:
		return apierrors.NewInternalError(errors.New("injected by gauntlet sim"))
	}
}

func (c *faultyClient) reader() client.Reader {
	if c.stale != nil {
		return c.stale
	}
	return c.Client
}

func (c *faultyClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.check("get"); err != nil {
		return err
	}
	return c.reader().Get(ctx, key, obj, opts...)
}

func (c *faultyClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.check("list"); err != nil {
		return err
	}
	return c.reader().List(ctx, list, opts...)
}

func (c *faultyClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.write("create"); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *faultyClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.write("update"); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *faultyClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.write("patch"); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *faultyClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.write("apply"); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *faultyClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.write("delete"); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *faultyClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.write("delete"); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *faultyClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *faultyClient) SubResource(sub string) client.SubResourceClient {
	return &faultySubResource{SubResourceClient: c.Client.SubResource(sub), parent: c, sub: sub}
}

type faultySubResource struct {
	client.SubResourceClient
	parent *faultyClient
	sub    string
}

func (s *faultySubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.parent.write("update/" + s.sub); err != nil {
		return err
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *faultySubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.parent.write("patch/" + s.sub); err != nil {
		return err
	}
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

// eventsFor maps a change through the watches to requests.
func eventsFor(scheme *runtime.Scheme, watches []Watch, ch change) ([]requestKey, error) {
	obj := ch.new
	if obj == nil {
		obj = ch.old
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	var out []requestKey
	for _, w := range watches {
		wk, err := apiutil.GVKForObject(w.Kind, scheme)
		if err != nil {
			return nil, fmt.Errorf("watch kind %T: %w", w.Kind, err)
		}
		if wk != gvk {
			continue
		}
		if w.Predicate != nil && !passes(w, ch) {
			continue
		}
		mapper := w.Map
		if mapper == nil {
			out = append(out, requestKey{Namespace: obj.GetNamespace(), Name: obj.GetName()})
			continue
		}
		for _, r := range mapper(obj) {
			out = append(out, requestKey(r.NamespacedName))
		}
	}
	return out, nil
}

func passes(w Watch, ch change) bool {
	switch {
	case ch.old == nil:
		return w.Predicate.Create(event.CreateEvent{Object: ch.new})
	case ch.new == nil:
		return w.Predicate.Delete(event.DeleteEvent{Object: ch.old})
	default:
		return w.Predicate.Update(event.UpdateEvent{ObjectOld: ch.old, ObjectNew: ch.new})
	}
}
