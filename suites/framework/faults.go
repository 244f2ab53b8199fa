package framework

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Fault makes matching client calls fail with Err.
type Fault struct {
	// Verb is get, list, create, update, patch, apply or delete; a
	// subresource write is "update/status", "patch/status" and so on.
	Verb string
	// Kind restricts the fault to one kind; empty matches every kind.
	Kind string
	// Err is returned instead of making the call.
	Err error
	// Times is how many matching calls fail before the fault is spent; 0
	// fails every matching call until Clear.
	Times int

	hits int
}

// Faults injects API errors into a client. Wrap the client under test with
// Client, then Add and Clear faults as the test goes on; Injected counts the
// calls that failed.
type Faults struct {
	mu       sync.Mutex
	faults   []*Fault
	injected int
}

// Add arms a fault.
func (f *Faults) Add(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &fault)
}

// Clear disarms every fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Injected is how many calls failed because of a fault.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// Client wraps c so that armed faults fail its calls. Other users of c (a
// simulator, the test itself) are not affected.
func (f *Faults) Client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, f.Funcs())
}

func (f *Faults) check(verb string, scheme *runtime.Scheme, obj runtime.Object) error {
	kind := ""
	if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil {
		kind = gvk.Kind
	}
	return f.checkKind(verb, kind)
}

func (f *Faults) checkKind(verb, kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.faults {
		if ft.Verb != verb || (ft.Kind != "" && ft.Kind != kind) || (ft.Times > 0 && ft.hits >= ft.Times) {
			continue
		}
		ft.hits++
		f.injected++
		return ft.Err
	}
	return nil
}

// Funcs returns interceptor functions that fail matching calls and forward
// the others.
func (f *Faults) Funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := f.check("get", c.Scheme(), obj); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			kind := ""
			if gvk, err := apiutil.GVKForObject(list, c.Scheme()); err == nil {
				kind = gvk.Kind[:len(gvk.Kind)-len("List")]
			}
			if err := f.checkKind("list", kind); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := f.check("create", c.Scheme(), obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := f.check("update", c.Scheme(), obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := f.check("patch", c.Scheme(), obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			kind, _, _ := applyTarget(obj)
			if err := f.checkKind("apply", kind); err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := f.check("delete", c.Scheme(), obj); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if err := f.check("update/"+sub, c.Scheme(), obj); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := f.check("patch/"+sub, c.Scheme(), obj); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// Common API errors, as the API server returns them.
var (
	// ErrServerTimeout is a 504-style timeout.
	ErrServerTimeout = apierrors.NewServerTimeout(schema.GroupResource{}, "request", 1)
	// ErrInternal is a 500.
	ErrInternal = apierrors.NewInternalError(fmt.Errorf("injected by gauntlet"))
	// ErrTooManyRequests is a 429.
	ErrTooManyRequests = apierrors.NewTooManyRequests("injected by gauntlet", 1)
)

// ErrConflict is a 409 on the named object, as an optimistic-lock failure returns it.
func ErrConflict(kind, name string) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: kind}, name, fmt.Errorf("injected by gauntlet"))
}
