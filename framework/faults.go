package framework

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// AnyWrite as a Fault's Verb matches every write: create, update, patch,
// apply, delete, deleteAllOf and the subresource writes.
const AnyWrite = "write"

// Fault matches client calls and fails them: with an API error, or as a
// crash that fails every call after it too.
type Fault struct {
	// Verb is get, list, watch, create, update, patch, apply, delete or
	// deleteAllOf; a subresource call is "update/status", "patch/status",
	// "get/scale" and so on (see Call). AnyWrite matches every write, and
	// an empty Verb every call.
	Verb string
	// Kind restricts the fault to one kind (of a list's items, for list
	// and watch); empty matches every kind.
	Kind string
	// Namespace and Name restrict the fault to one namespace or one object;
	// empty matches any. A list or watch matches by the namespace it lists,
	// never by Name.
	Namespace, Name string
	// Nth, if set, fails only the Nth matching call (1-based): the calls
	// before it go through, and so do those after it.
	Nth int
	// Times is how many matching calls fail, from the first; 0 fails every
	// matching call until Clear. It is ignored when Nth is set.
	Times int
	// Err is returned instead of making the call.
	Err error
	// Crash makes the failure final, as a process that crashed makes no
	// more calls: once the fault fires, every later call through the Faults
	// fails with Err too, whatever it matches, until Clear.
	Crash bool

	// matched counts the calls the fault matched, whether or not it (or
	// an earlier fault) failed them.
	matched int
}

// matches tells whether the fault applies to a call; kind gives the call's
// kind, which only a fault restricted to a kind asks for.
func (ft *Fault) matches(call Call, kind func() string) bool {
	switch {
	case ft.Verb == "" || ft.Verb == call.Verb:
	case ft.Verb == AnyWrite && call.Write():
	default:
		return false
	}
	if ft.Kind != "" && ft.Kind != kind() {
		return false
	}
	if ft.Namespace != "" || ft.Name != "" {
		key := call.Key()
		if (ft.Namespace != "" && ft.Namespace != key.Namespace) || (ft.Name != "" && ft.Name != key.Name) {
			return false
		}
	}
	return true
}

// count counts a matching call and tells whether the fault fails it.
func (ft *Fault) count() bool {
	ft.matched++
	if ft.Nth > 0 {
		return ft.matched == ft.Nth
	}
	return ft.Times == 0 || ft.matched <= ft.Times
}

// Faults injects faults into a client: the unit tier's fake client, an
// envtest client, or the simulation's reconciler. Wrap the client under
// test with Client or Wrap (or pass Funcs to a fake client), then Add and
// Clear faults as the test goes on; Injected counts the calls that failed.
type Faults struct {
	mu       sync.Mutex
	faults   []*Fault
	injected int
	crashed  bool
	crashErr error
}

// Add arms a fault. Faults are tried in the order they were added: the
// first that fails a call gives its error.
func (f *Faults) Add(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fault.matched = 0
	f.faults = append(f.faults, &fault)
}

// Clear disarms every fault and ends a crash.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults, f.crashed, f.crashErr = nil, false, nil
}

// Injected is how many calls failed because of a fault.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// Crashed tells whether a Crash fault fired (and Clear has not been called
// since): every call fails.
func (f *Faults) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// Client wraps c so that armed faults fail its calls. Other users of c (a
// simulator, the test itself) are not affected.
func (f *Faults) Client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, f.Funcs())
}

// Wrap is Client for a client that may not watch, such as envtest's.
func (f *Faults) Wrap(c client.Client) client.Client {
	return wrap(c, f.Funcs())
}

// Funcs returns interceptor functions that fail matching calls and forward
// the others.
func (f *Faults) Funcs() interceptor.Funcs {
	return Intercept(f.intercept)
}

func (f *Faults) intercept(_ context.Context, c client.Client, call Call) (func(error), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		f.injected++
		return nil, f.crashErr
	}
	kind := func() string { return call.Kind(c.Scheme()) }
	var failedBy *Fault
	for _, ft := range f.faults {
		if ft.matches(call, kind) && ft.count() && failedBy == nil {
			failedBy = ft
		}
	}
	if failedBy == nil {
		return nil, nil
	}
	f.injected++
	if failedBy.Crash {
		f.crashed, f.crashErr = true, failedBy.Err
	}
	return nil, failedBy.Err
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
