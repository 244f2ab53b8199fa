package sim

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// ErrCrashed is what every call returns once a simulated crash happened.
var ErrCrashed = errors.New("sim: the reconciler crashed (simulated)")

// change is one write seen by the world: old and new states (nil for
// create or delete).
type change struct {
	old, new client.Object
}

// readsFrom serves Get and List from the reader of the moment (the world's
// current view, or a stale one); everything else goes to the wrapped client.
func readsFrom(reader func(context.Context) (client.Reader, error)) interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			r, err := reader(ctx)
			if err != nil {
				return err
			}
			return r.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			r, err := reader(ctx)
			if err != nil {
				return err
			}
			return r.List(ctx, list, opts...)
		},
	}
}

// eventing returns interceptor functions that emit a change for every write,
// so that the world's watches can turn it into reconcile requests. current
// reads the state before a write (the runner's view); the state after it is
// read from the wrapped client (the API itself: the view is older than the
// write). A patch that removes the last finalizer of a deleted object
// deletes it, which the response does not say: reading back shows it. A
// write that changed nothing emits nothing, and neither does deleteAllOf,
// which names no object.
func eventing(current func(context.Context) (client.Reader, error), emit func(change)) interceptor.Funcs {
	return framework.InterceptWrites(func(ctx context.Context, c client.Client, call framework.Call) (func(error), error) {
		if call.Verb == "deleteAllOf" {
			return nil, nil
		}
		obj, err := call.Target(c.Scheme())
		if err != nil {
			return nil, nil // an apply configuration the scheme cannot type
		}
		create := call.Verb == "create"
		var old client.Object
		if !create {
			old = stateOf(ctx, current, obj)
		}
		return func(err error) {
			if create && err != nil {
				return
			}
			cur := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				cur = nil // deleted
			}
			if old == nil && cur == nil {
				return
			}
			if old != nil && cur != nil && old.GetResourceVersion() == cur.GetResourceVersion() {
				return // no change, no event
			}
			emit(change{old: old, new: cur})
		}, nil
	})
}

// stateOf reads obj's current state, or nil when it does not exist.
func stateOf(ctx context.Context, current func(context.Context) (client.Reader, error), obj client.Object) client.Object {
	r, err := current(ctx)
	if err != nil {
		return nil
	}
	old := obj.DeepCopyObject().(client.Object)
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), old); err != nil {
		return nil
	}
	return old
}

// reconcilerView is the reconciler's view of the API during one reconcile:
// the schedule's fault runs through framework.Faults (an API error on the
// Nth call of a verb; a crash before a write, after which every call fails),
// reads come from a stale snapshot under a Stale fault, and writes that got
// past the fault are counted.
type reconcilerView struct {
	client client.Client
	faults *framework.Faults
	writes int
}

func newReconcilerView(api client.WithWatch, f Fault, stale client.Reader) *reconcilerView {
	v := &reconcilerView{faults: &framework.Faults{}}
	if ft, ok := f.clientFault(); ok {
		v.faults.Add(ft)
	}
	funcs := framework.InterceptWrites(func(context.Context, client.Client, framework.Call) (func(error), error) {
		v.writes++
		return nil, nil
	})
	if stale != nil {
		reads := readsFrom(func(context.Context) (client.Reader, error) { return stale, nil })
		funcs.Get, funcs.List = reads.Get, reads.List
	}
	v.client = v.faults.Client(interceptor.NewClient(api, funcs))
	return v
}

func (v *reconcilerView) crashed() bool { return v.faults.Crashed() }

// clientFault is the fault of the one fault layer that executes f on the
// reconciler's calls; Stale and DropEvent faults are not client faults.
func (f Fault) clientFault() (framework.Fault, bool) {
	switch f.Kind {
	case Crash:
		// CrashAfter writes go through; the next one crashes.
		return framework.Fault{Verb: framework.AnyWrite, Nth: f.CrashAfter + 1, Crash: true, Err: ErrCrashed}, true
	case APIError:
		return framework.Fault{Verb: f.Verb, Nth: f.Nth, Err: f.Err.err()}, true
	}
	return framework.Fault{}, false
}

// err is the API error, as the framework builds it.
func (k APIErrorKind) err() error {
	switch k {
	case Conflict:
		return framework.ErrConflict("sim", "object")
	case Timeout:
		return framework.ErrServerTimeout
	case TooManyRequests:
		return framework.ErrTooManyRequests
	default:
		return framework.ErrInternal
	}
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
