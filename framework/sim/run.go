package sim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// World is one run's API, shared by the world steps, perturbations and
// invariants. Writes through Client wake the controller through the
// target's watches, as writes to a real API server would.
type World struct {
	// Client writes with events and reads the current state from memory
	// (as an informer cache with no lag would); use it for everything the
	// world and the invariants do.
	Client client.Client
	// API is the underlying fake API (no events, reads through the fake's
	// serialisation): for the rare read that must bypass the view.
	API client.WithWatch

	notes map[string]int
	logf  func(format string, args ...any)
}

// Logf adds a line to the run's trace: what a world step or perturbation
// did beyond what the trace shows by itself (a fault it fired on its own).
func (w *World) Logf(format string, args ...any) {
	if w.logf != nil {
		w.logf("      "+format, args...)
	}
}

// Note records that something worth counting happened in this run (a
// member failed while a scale was in flight, say): the run's Result carries
// the counts, and RunSeeds adds them to Options.Tally, so that a test can
// show from the simulator's own records which situations its seeds reached.
func (w *World) Note(label string) {
	if w.notes == nil {
		w.notes = map[string]int{}
	}
	w.notes[label]++
}

// Options bound a run.
type Options struct {
	// Config shapes generated schedules.
	Config Config
	// SettlePasses bounds liveness: once the faults stop, the system must
	// settle within this many rounds (30 by default).
	SettlePasses int
	// Tally, when set, receives the notes (World.Note) of every schedule
	// RunSeeds and Check run: of its run with faults, not of the fault-free
	// twin, so each seed counts once.
	Tally *Tally
}

func (o Options) settlePasses() int {
	if o.SettlePasses == 0 {
		return 30
	}
	return o.SettlePasses
}

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	Kind      InvariantKind
	// Step is the index of the action after which it broke; -1 while settling.
	Step int
	Err  error
}

func (v *Violation) Error() string {
	where := fmt.Sprintf("after step %d", v.Step)
	if v.Step < 0 {
		where = "once the faults stopped"
	}
	return fmt.Sprintf("%s invariant %q broken %s: %v", v.Kind, v.Invariant, where, v.Err)
}

// Result is the outcome of one run.
type Result struct {
	Schedule  Schedule
	Trace     []string
	Violation *Violation
	// End is the normalised end state: kind/namespace/name -> the object as
	// unstructured content, volatile fields removed and keyed lists sorted.
	End map[string]map[string]any
	// Perturbations names the target's perturbations, for Describe.
	Perturbations []string
	// Notes counts what the run noted (World.Note), by label.
	Notes map[string]int
}

type requestKey = client.ObjectKey

type runner struct {
	target  Target
	hooks   *Hooks
	world   *World
	fake    client.WithWatch
	api     client.WithWatch // the world's client: the current view, writes with events
	queue   []requestKey
	queued  map[requestKey]bool
	timers  map[requestKey]time.Duration
	now     time.Duration
	rec     reconcile.Reconciler
	proxy   *switchClient
	history []*memoryReader
	// indexes serve MatchingFields from the views, as the fake's serve it.
	indexes []memoryIndex
	deleted []client.Object
	events  int
	// reconciled is true when the current action ran a reconcile.
	reconciled bool
	// view is the in-memory world as of event count viewAt.
	view   *memoryReader
	viewAt int
	errs   []error
	trace  []string
}

func (r *runner) onChange(ch change) {
	r.events++
	if r.view != nil {
		r.view = r.view.with(ch)
		r.viewAt = r.events
	}
	if ch.new == nil && ch.old != nil {
		r.deleted = append(r.deleted, ch.old)
	}
	keys, err := eventsFor(r.target.Scheme, r.target.Watches, ch)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	for _, k := range keys {
		r.enqueue(k)
	}
}

func (r *runner) enqueue(k requestKey) {
	if r.queued[k] {
		return // coalesced, as a workqueue does
	}
	r.queued[k] = true
	r.queue = append(r.queue, k)
}

func (r *runner) pop() (requestKey, bool) {
	if len(r.queue) == 0 {
		return requestKey{}, false
	}
	k := r.queue[0]
	r.queue = r.queue[1:]
	delete(r.queued, k)
	return k, true
}

func (r *runner) logf(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf(format, args...))
}

// Run executes a schedule against a target and checks its invariants.
func Run(ctx context.Context, t Target, s Schedule, o Options) (*Result, error) {
	r, err := newRunner(ctx, t)
	if err != nil {
		return nil, err
	}
	res := &Result{Schedule: s}
	for _, p := range r.hooks.Perturbations {
		res.Perturbations = append(res.Perturbations, p.Name)
	}
	if err := r.resync(ctx); err != nil {
		return nil, err
	}

	// Whatever the outcome, the result carries what the run noted so far.
	defer func() { res.Notes = r.world.notes }()
	for i, a := range s.Actions {
		v, err := r.step(ctx, i, a)
		if err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i, a.Kind, err)
		}
		if v != nil {
			res.Violation, res.Trace = v, r.trace
			return res, nil
		}
	}

	// The faults stop. Heal the environment, resync once (recovering any
	// dropped event), then the system must settle on events alone.
	r.logf("-- faults stop: heal, resync, settle within %d rounds", o.settlePasses())
	if r.hooks.Heal != nil {
		if err := r.hooks.Heal(ctx); err != nil {
			return nil, fmt.Errorf("healing: %w", err)
		}
	}
	if err := r.resync(ctx); err != nil {
		return nil, err
	}
	settled, lastRound, v, err := r.settle(ctx, o.settlePasses())
	if err != nil {
		return nil, err
	}
	if v != nil {
		res.Violation, res.Trace = v, r.trace
		return res, nil
	}
	if !settled {
		res.Violation = &Violation{Invariant: "settles", Kind: Liveness, Step: -1,
			Err: fmt.Errorf("still changing after %d rounds; last round:\n  %s", o.settlePasses(), strings.Join(lastRound, "\n  "))}
	} else if r.hooks.Converged != nil {
		if err := r.hooks.Converged(ctx); err != nil {
			res.Violation = &Violation{Invariant: "converges to the spec", Kind: Liveness, Step: -1, Err: err}
		}
	}
	end, err := r.endState(ctx)
	if err != nil {
		return nil, err
	}
	res.End, res.Trace = end, r.trace
	if len(r.errs) > 0 {
		return res, errors.Join(r.errs...)
	}
	return res, nil
}

// newRunner sets up the target's world over a fresh fake API.
func newRunner(ctx context.Context, t Target) (*runner, error) {
	r := &runner{target: t, queued: map[requestKey]bool{}, timers: map[requestKey]time.Duration{}}
	r.fake = framework.NewFakeClient(t.Scheme, framework.FakeClientOptions{
		StatusSubresources: t.StatusSubresources, Indexes: t.Indexes, RESTMapper: restMapperFor(t.Scheme),
	})
	indexes, err := memoryIndexes(t.Scheme, t.Indexes)
	if err != nil {
		return nil, err
	}
	r.indexes = indexes
	r.events = 1 // no view yet
	// The world reads the runner's current in-memory view and writes
	// through to the fake API with events.
	current := func(ctx context.Context) (client.Reader, error) { return r.currentView(ctx) }
	r.api = interceptor.NewClient(interceptor.NewClient(r.fake, eventing(current, r.onChange)), readsFrom(current))
	r.world = &World{Client: r.api, API: r.fake, logf: r.logf}
	hooks, err := t.Setup(ctx, r.world)
	if err != nil {
		return nil, fmt.Errorf("setting up %s: %w", t.Name, err)
	}
	r.hooks = hooks
	return r, nil
}

// settle runs rounds (every queued request reconciled, then a world step)
// until one is quiet after every pending requeue timer has fired once (time
// fast-forwarded to it), so that periodic re-checks (member health, say)
// have had their say; at most passes rounds. It returns whether the system
// settled and, if not, what the last round did; v is an invariant a step
// broke on the way.
func (r *runner) settle(ctx context.Context, passes int) (settled bool, lastRound []string, v *Violation, err error) {
	timersFired := false
	for round := 0; round < passes && !settled; round++ {
		before := r.events
		var roundLog []string
		if roundLog, v, err = r.round(ctx); err != nil || v != nil {
			return false, nil, v, err
		}
		lastRound = roundLog
		quiet := r.events == before && len(r.queue) == 0
		switch {
		case !quiet:
			timersFired = false
		case timersFired || len(r.timers) == 0:
			settled = true
		default:
			r.fastForward()
			timersFired = true
		}
	}
	return settled, lastRound, nil, nil
}

// round reconciles every request queued when it starts, then steps the
// world once; it returns the trace line of each reconcile.
func (r *runner) round(ctx context.Context) ([]string, *Violation, error) {
	var log []string
	for n := len(r.queue); n > 0; n-- {
		v, err := r.step(ctx, -1, Action{Kind: Reconcile})
		if err != nil || v != nil {
			return nil, v, err
		}
		log = append(log, r.trace[len(r.trace)-1])
	}
	v, err := r.step(ctx, -1, Action{Kind: WorldStep})
	return log, v, err
}

func (r *runner) resync(ctx context.Context) error {
	roots, err := r.hooks.Roots(ctx)
	if err != nil {
		return fmt.Errorf("listing roots: %w", err)
	}
	for _, k := range roots {
		r.enqueue(k.NamespacedName)
	}
	return nil
}

// fastForward jumps simulated time to the latest pending timer and fires
// them all.
func (r *runner) fastForward() {
	for _, at := range r.timers {
		if at > r.now {
			r.now = at
		}
	}
	r.now -= time.Second
	r.tick()
	r.logf("  settle fast-forward to %s: timers fired, queue %v", r.now, r.queue)
}

// tick advances simulated time by one world step (a second) and fires the
// requeue timers that are due, in a stable order.
func (r *runner) tick() {
	r.now += time.Second
	var due []requestKey
	for k, at := range r.timers {
		if at <= r.now {
			due = append(due, k)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].String() < due[j].String() })
	for _, k := range due {
		delete(r.timers, k)
		r.enqueue(k)
	}
}

// step runs one action and checks the invariants after it.
func (r *runner) step(ctx context.Context, i int, a Action) (*Violation, error) {
	if err := r.remember(ctx); err != nil {
		return nil, err
	}
	r.deleted = nil
	r.reconciled = false
	eventsBefore := r.events
	if err := r.do(ctx, i, a); err != nil {
		return nil, err
	}
	// State that did not change cannot break an invariant it kept; the
	// world's own state outside the API (an etcd member failing) changes only
	// through perturbations and world steps, which are always checked.
	if r.events == eventsBefore && !r.reconciled && a.Kind == Reconcile {
		return nil, nil
	}
	info := StepInfo{Index: i, Action: a, ByOperator: r.reconciled, Deleted: r.deleted}
	for _, inv := range r.hooks.Invariants {
		if err := inv.Check(ctx, info); err != nil {
			return &Violation{Invariant: inv.Name, Kind: inv.Kind, Step: i, Err: err}, nil
		}
	}
	return nil, nil
}

func (r *runner) do(ctx context.Context, i int, a Action) error {
	prefix := fmt.Sprintf("%3d ", i)
	if i < 0 {
		prefix = "  settle "
	}
	switch a.Kind {
	case Resync:
		if err := r.resync(ctx); err != nil {
			return err
		}
		r.logf("%sresync: queue %v", prefix, r.queue)
	case WorldStep:
		r.tick()
		for _, step := range r.hooks.World {
			if _, err := step(ctx); err != nil {
				return fmt.Errorf("world step: %w", err)
			}
		}
		r.logf("%sworld", prefix)
	case Perturb:
		if len(r.hooks.Perturbations) == 0 {
			r.logf("%sperturb: the target has none", prefix)
			return nil
		}
		p := r.hooks.Perturbations[a.Perturbation%len(r.hooks.Perturbations)]
		desc, err := p.Apply(ctx, a.Choice)
		if err != nil {
			return fmt.Errorf("perturbation %s: %w", p.Name, err)
		}
		r.logf("%sperturb %s: %s", prefix, p.Name, desc)
	case Reconcile:
		return r.reconcile(ctx, prefix, a.Fault)
	}
	if a.Fault.Kind == DropEvent {
		if k, ok := r.pop(); ok {
			r.logf("%s  [fault] dropped the event for %s", prefix, k)
		}
	}
	return nil
}

func (r *runner) reconcile(ctx context.Context, prefix string, f Fault) error {
	k, ok := r.pop()
	if !ok {
		r.logf("%sreconcile: queue empty", prefix)
		return nil
	}
	// One reconciler lives until it crashes; each pass it sees the API
	// through this pass's faults.
	if r.rec == nil {
		r.proxy = &switchClient{}
		r.rec = r.hooks.NewReconciler(r.proxy)
	}
	r.reconciled = true
	// Without a stale fault the reconciler reads the current view, as it
	// would read an informer cache that is up to date.
	var stale client.Reader
	if f.Kind == Stale {
		stale = r.staleView(f.Lag)
	}
	fc := newReconcilerView(r.api, f, stale)
	r.proxy.Client = fc.client
	res, err := r.rec.Reconcile(ctx, reconcile.Request{NamespacedName: k})
	faultNote := ""
	if f.Kind != NoFault {
		faultNote = " [fault: " + f.String() + "]"
	}
	switch {
	case fc.crashed():
		r.rec = nil // in-memory state lost
		r.enqueue(k)
		r.logf("%sreconcile %s%s: crashed after %d write(s)", prefix, k, faultNote, fc.writes)
	case err != nil:
		r.enqueue(k) // the workqueue retries errors
		r.logf("%sreconcile %s%s: error: %v (%d write(s))", prefix, k, faultNote, err, fc.writes)
	case res.RequeueAfter > 0:
		if at, ok := r.timers[k]; !ok || r.now+res.RequeueAfter < at {
			r.timers[k] = r.now + res.RequeueAfter
		}
		r.logf("%sreconcile %s%s: ok, requeue after %s (%d write(s))", prefix, k, faultNote, res.RequeueAfter, fc.writes)
	default:
		r.logf("%sreconcile %s%s: ok (%d write(s))", prefix, k, faultNote, fc.writes)
	}
	return nil
}

func restMapperFor(s *runtime.Scheme) meta.RESTMapper {
	if m, ok := restMappers.Load(s); ok {
		return m.(meta.RESTMapper)
	}
	m, _ := restMappers.LoadOrStore(s, testrestmapper.TestOnlyStaticRESTMapper(s))
	return m.(meta.RESTMapper)
}
