package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Call is one client call, as a Hook sees it.
type Call struct {
	// Verb is get, list, watch, create, update, patch, apply, delete or
	// deleteAllOf; a subresource call adds the subresource's name:
	// "update/status", "patch/status", "get/scale", "create/eviction".
	Verb string
	// Object is the object read or written: for a subresource call, the
	// object the subresource belongs to; for deleteAllOf, an empty object
	// of the kind. Nil for list, watch and apply.
	Object client.Object
	// List is the list read by list and watch.
	List client.ObjectList
	// Apply is the configuration of an apply (to the object or to a
	// subresource).
	Apply runtime.ApplyConfiguration

	// key is the key a get asked for.
	key client.ObjectKey
	// listOpts are the options of a list or watch.
	listOpts []client.ListOption
}

// Write tells whether the call writes.
func (c Call) Write() bool {
	verb, _, _ := strings.Cut(c.Verb, "/")
	switch verb {
	case "get", "list", "watch":
		return false
	}
	return true
}

// Kind is the kind of the object the call is about (of a list's items for
// list and watch), or "" when the scheme does not know it.
func (c Call) Kind(scheme *runtime.Scheme) string {
	switch {
	case c.Apply != nil:
		kind, _, _ := applyTarget(c.Apply)
		return kind
	case c.List != nil:
		if gvk, err := apiutil.GVKForObject(c.List, scheme); err == nil {
			return strings.TrimSuffix(gvk.Kind, "List")
		}
	case c.Object != nil:
		if gvk, err := apiutil.GVKForObject(c.Object, scheme); err == nil {
			return gvk.Kind
		}
	}
	return ""
}

// Key is the namespace and name of the object the call is about; for list
// and watch, the namespace listed (empty for every namespace) and no name.
func (c Call) Key() client.ObjectKey {
	switch {
	case c.Verb == "get":
		return c.key
	case c.Apply != nil:
		_, _, key := applyTarget(c.Apply)
		return key
	case c.List != nil:
		return client.ObjectKey{Namespace: (&client.ListOptions{}).ApplyOptions(c.listOpts).Namespace}
	case c.Object != nil:
		return client.ObjectKeyFromObject(c.Object)
	}
	return client.ObjectKey{}
}

// Target is the object the call writes: Object, or for an apply an empty
// object of the configuration's kind, namespace and name, built from the
// scheme (an error when the configuration does not name them or the scheme
// does not know the kind). Read it back to see what the write did.
func (c Call) Target(scheme *runtime.Scheme) (client.Object, error) {
	if c.Apply == nil {
		if c.Object == nil {
			return nil, fmt.Errorf("a %s call writes no object", c.Verb)
		}
		return c.Object, nil
	}
	kind, apiVersion, key := applyTarget(c.Apply)
	if kind == "" || apiVersion == "" || key.Name == "" {
		return nil, errors.New("the apply configuration names no kind, apiVersion or name")
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	ro, err := scheme.New(gv.WithKind(kind))
	if err != nil {
		return nil, err
	}
	o, ok := ro.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", gv.WithKind(kind))
	}
	o.SetName(key.Name)
	o.SetNamespace(key.Namespace)
	return o, nil
}

// Hook runs before a call of a client wrapped with Intercept. A non-nil
// error fails the call without making it; a non-nil after runs once the
// call has returned, with its error. c is the wrapped client: calls made
// through it are not intercepted again.
type Hook func(ctx context.Context, c client.Client, call Call) (after func(error), err error)

// Intercept returns interceptor functions that run hook around every call
// (reads, writes, watches and subresource calls) and make the call in
// between. It is the one shape behind Faults and WriteLog; wrap a client
// with interceptor.NewClient or pass the functions to a fake client.
func Intercept(hook Hook) interceptor.Funcs {
	around := func(ctx context.Context, c client.Client, call Call, do func() error) error {
		after, err := hook(ctx, c, call)
		if err != nil {
			return err
		}
		err = do()
		if after != nil {
			after(err)
		}
		return err
	}
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return around(ctx, c, Call{Verb: "get", Object: obj, key: key}, func() error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return around(ctx, c, Call{Verb: "list", List: list, listOpts: opts}, func() error { return c.List(ctx, list, opts...) })
		},
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			var w watch.Interface
			err := around(ctx, c, Call{Verb: "watch", List: list, listOpts: opts}, func() (err error) {
				w, err = c.Watch(ctx, list, opts...)
				return err
			})
			return w, err
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return around(ctx, c, Call{Verb: "create", Object: obj}, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return around(ctx, c, Call{Verb: "update", Object: obj}, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return around(ctx, c, Call{Verb: "patch", Object: obj}, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return around(ctx, c, Call{Verb: "apply", Apply: obj}, func() error { return c.Apply(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return around(ctx, c, Call{Verb: "delete", Object: obj}, func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return around(ctx, c, Call{Verb: "deleteAllOf", Object: obj}, func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		SubResourceGet: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceGetOption) error {
			return around(ctx, c, Call{Verb: "get/" + sub, Object: obj}, func() error {
				return c.SubResource(sub).Get(ctx, obj, subObj, opts...)
			})
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return around(ctx, c, Call{Verb: "create/" + sub, Object: obj}, func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return around(ctx, c, Call{Verb: "update/" + sub, Object: obj}, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return around(ctx, c, Call{Verb: "patch/" + sub, Object: obj}, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return around(ctx, c, Call{Verb: "apply/" + sub, Apply: obj}, func() error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	}
}

// InterceptWrites is Intercept for writes alone: reads and watches go
// straight to the wrapped client.
func InterceptWrites(hook Hook) interceptor.Funcs {
	f := Intercept(hook)
	f.Get, f.List, f.Watch, f.SubResourceGet = nil, nil, nil, nil
	return f
}

// wrap intercepts c's calls with funcs. A client that cannot watch (an
// envtest or manager client) gets a Watch that says so.
func wrap(c client.Client, funcs interceptor.Funcs) client.WithWatch {
	ww, ok := c.(client.WithWatch)
	if !ok {
		ww = cannotWatch{c}
	}
	return interceptor.NewClient(ww, funcs)
}

type cannotWatch struct{ client.Client }

func (cannotWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("framework: the wrapped client cannot watch")
}

// applyTarget reads kind, apiVersion, namespace and name from an apply
// configuration, which every generated configuration exposes through these
// getters; empty strings for what it does not say.
func applyTarget(obj runtime.ApplyConfiguration) (kind, apiVersion string, key client.ObjectKey) {
	type named interface {
		GetAPIVersion() *string
		GetKind() *string
		GetName() *string
		GetNamespace() *string
	}
	n, ok := obj.(named)
	if !ok {
		return "", "", client.ObjectKey{}
	}
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	return deref(n.GetKind()), deref(n.GetAPIVersion()), client.ObjectKey{Namespace: deref(n.GetNamespace()), Name: deref(n.GetName())}
}
