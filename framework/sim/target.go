package sim

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// Target is an operator under simulation: everything the library needs to
// know about it. Another team adopts Gauntlet by writing one of these.
type Target struct {
	// Name appears in reports and replay commands.
	Name string
	// Scheme knows every kind involved.
	Scheme *runtime.Scheme
	// StatusSubresources are the custom kinds whose status is a subresource.
	StatusSubresources []client.Object
	// Indexes are the field indexes the controller lists by, as its
	// manager registers them; fresh and stale reads both honour them.
	Indexes []framework.FieldIndex
	// Watches say which object changes wake the controller, as its
	// For/Owns/Watches and predicates do.
	Watches []Watch
	// Setup prepares one run on a fresh world: it creates the initial
	// objects through w.Client and returns the run's hooks.
	Setup func(ctx context.Context, w *World) (*Hooks, error)
}

// Hooks are one run's operator-specific parts.
type Hooks struct {
	// NewReconciler builds a reconciler on c. It is called at the start and
	// after every crash, so in-memory state does not survive a crash.
	NewReconciler func(c client.Client) reconcile.Reconciler
	// Roots are the requests a resync enqueues (the custom resources).
	Roots func(ctx context.Context) ([]reconcile.Request, error)
	// World steps run on every World action and while settling: simulated
	// controllers, kubelets, garbage collection.
	World []framework.EnvStep
	// Perturbations are user and environment events the schedule may inject.
	Perturbations []Perturbation
	// Heal undoes lasting environment perturbations (unready pods, failed
	// members) when the faults stop, before liveness is checked.
	Heal func(ctx context.Context) error
	// Invariants are checked after every action.
	Invariants []Invariant
	// Converged checks, once settled, that the world matches the spec.
	Converged func(ctx context.Context) error
	// Kinds are snapshotted for traces, diffs and the differential oracle.
	// They must cover every kind the reconciler reads: stale reads are served
	// from snapshots of these kinds.
	Kinds []client.ObjectList
	// VolatileFields are field names whose values legitimately differ
	// between runs that reach the same state (IDs a system assigns), left
	// out of the differential comparison. Resource versions, UIDs and
	// timestamps are always left out.
	VolatileFields []string
	// History, when set, picks the objects that record what happened
	// rather than the state reached, such as finished Jobs and their pods:
	// how many there are depends on timing, so the differential oracle
	// leaves them out (invariants still see them).
	History func(obj client.Object) bool
}

// Perturbation is a user or environment event: a scale or image change, a
// pod that becomes unready, a member that fails, a pod deleted.
type Perturbation struct {
	Name string
	// Apply performs it; choice is a seeded random number for its choices.
	// It returns a short description for the trace.
	Apply func(ctx context.Context, choice uint64) (string, error)
}

// InvariantKind groups invariants in reports.
type InvariantKind string

// Kinds of invariants.
const (
	Safety   InvariantKind = "safety"
	Honesty  InvariantKind = "status honesty"
	Liveness InvariantKind = "liveness"
)

// Invariant must hold after every action.
type Invariant struct {
	Name string
	Kind InvariantKind
	// Check returns an error describing the violation.
	Check func(ctx context.Context, s StepInfo) error
}

// StepInfo tells an invariant what the last action was.
type StepInfo struct {
	Index  int
	Action Action
	// ByOperator is true when the action ran a reconcile.
	ByOperator bool
	// Deleted lists objects that disappeared from the API during the
	// action, as they last were.
	Deleted []client.Object
}

// Watch maps changes of one kind to reconcile requests.
type Watch struct {
	// Kind is an empty object of the watched kind.
	Kind client.Object
	// Predicate filters events, as builder.WithPredicates does; nil passes all.
	Predicate predicate.Predicate
	// Map turns a changed object into requests; nil maps an object to itself.
	Map func(obj client.Object) []reconcile.Request
}

// OwnedBy maps an object to its controller owner of the given kind, as
// Owns() does.
func OwnedBy(ownerKind string) func(client.Object) []reconcile.Request {
	return func(obj client.Object) []reconcile.Request {
		for _, ref := range obj.GetOwnerReferences() {
			if ref.Controller != nil && *ref.Controller && ref.Kind == ownerKind {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}}}
			}
		}
		return nil
	}
}
