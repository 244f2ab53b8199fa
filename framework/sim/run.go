package sim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
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
// the counts, and Explore adds them to Options.Tally, so that a test can
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
	// Explore and Check run: of its run with faults, not of the fault-free
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
	res := &Result{Schedule: s}
	for _, p := range hooks.Perturbations {
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
	if hooks.Heal != nil {
		if err := hooks.Heal(ctx); err != nil {
			return nil, fmt.Errorf("healing: %w", err)
		}
	}
	if err := r.resync(ctx); err != nil {
		return nil, err
	}
	// Settled means: a round with no event and nothing queued, after every
	// pending requeue timer has fired once (time fast-forwarded to it), so
	// that periodic re-checks (member health, say) have had their say.
	settled, timersFired := false, false
	var lastRound []string
	for round := 0; round < o.settlePasses() && !settled; round++ {
		before := r.events
		var roundLog []string
		for n := len(r.queue); n > 0; n-- {
			v, err := r.step(ctx, -1, Action{Kind: Reconcile})
			if err != nil {
				return nil, err
			}
			if v != nil {
				res.Violation, res.Trace = v, r.trace
				return res, nil
			}
			roundLog = append(roundLog, r.trace[len(r.trace)-1])
		}
		v, err := r.step(ctx, -1, Action{Kind: WorldStep})
		if err != nil {
			return nil, err
		}
		if v != nil {
			res.Violation, res.Trace = v, r.trace
			return res, nil
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
	if !settled {
		res.Violation = &Violation{Invariant: "settles", Kind: Liveness, Step: -1,
			Err: fmt.Errorf("still changing after %d rounds; last round:\n  %s", o.settlePasses(), strings.Join(lastRound, "\n  "))}
	} else if hooks.Converged != nil {
		if err := hooks.Converged(ctx); err != nil {
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

// switchClient lets one reconciler instance see each pass's faulty client.
type switchClient struct{ client.Client }

// remember keeps the view of the world before each action, for stale reads.
func (r *runner) remember(ctx context.Context) error {
	v, err := r.currentView(ctx)
	if err != nil {
		return err
	}
	r.history = append(r.history, v)
	if len(r.history) > 8 {
		r.history = r.history[1:]
	}
	return nil
}

// currentView is the world as it is now, in memory: rebuilt from the API
// only after a write happened.
func (r *runner) currentView(ctx context.Context) (*memoryReader, error) {
	if r.view != nil && r.viewAt == r.events {
		return r.view, nil
	}
	objs, err := r.listAll(ctx)
	if err != nil {
		return nil, err
	}
	r.view, r.viewAt = newMemoryReader(r.target.Scheme, objs), r.events
	r.view.indexes = r.indexes
	return r.view, nil
}

// listAll reads every object of the target's kinds from the API.
func (r *runner) listAll(ctx context.Context) ([]client.Object, error) {
	var objs []client.Object
	for _, proto := range r.hooks.Kinds {
		list := proto.DeepCopyObject().(client.ObjectList)
		if err := r.fake.List(ctx, list); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			objs = append(objs, it.(client.Object))
		}
	}
	return objs, nil
}

func (r *runner) staleView(lag int) *memoryReader {
	idx := len(r.history) - 1 - lag
	if idx < 0 {
		idx = 0
	}
	return r.history[idx]
}

// memoryReader serves Get and List from a snapshot of objects: the world as
// it was, for stale reads. It is far cheaper than a fake client per step.
type memoryReader struct {
	scheme  *runtime.Scheme
	objs    []client.Object
	gvks    []schema.GroupVersionKind
	indexes []memoryIndex
}

// memoryIndex is a framework.FieldIndex with its kind resolved.
type memoryIndex struct {
	gvk     schema.GroupVersionKind
	field   string
	extract client.IndexerFunc
}

func memoryIndexes(scheme *runtime.Scheme, in []framework.FieldIndex) ([]memoryIndex, error) {
	out := make([]memoryIndex, 0, len(in))
	for _, ix := range in {
		gvk, err := apiutil.GVKForObject(ix.Object, scheme)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", ix.Field, err)
		}
		out = append(out, memoryIndex{gvk: gvk, field: ix.Field, extract: ix.Extract})
	}
	return out, nil
}

// matchesFields tells whether an object of kind gvk passes a field
// selector, by the indexes: as a cache, it serves only exact matches on
// indexed fields.
func (m *memoryReader) matchesFields(gvk schema.GroupVersionKind, o client.Object, sel fields.Selector) (bool, error) {
	for _, req := range sel.Requirements() {
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return false, fmt.Errorf("field selector %q: only exact matches on indexed fields are served", sel)
		}
		i := slices.IndexFunc(m.indexes, func(ix memoryIndex) bool { return ix.gvk == gvk && ix.field == req.Field })
		if i < 0 {
			return false, fmt.Errorf("no index on %s by %q is registered (sim.Target.Indexes)", gvk.Kind, req.Field)
		}
		if !slices.Contains(m.indexes[i].extract(o), req.Value) {
			return false, nil
		}
	}
	return true, nil
}

// with returns a copy of the view with one change applied; views are
// immutable, so older ones keep serving stale reads.
func (m *memoryReader) with(ch change) *memoryReader {
	ref := ch.new
	if ref == nil {
		ref = ch.old
	}
	gvk, _ := apiutil.GVKForObject(ref, m.scheme)
	key := client.ObjectKeyFromObject(ref)
	out := &memoryReader{scheme: m.scheme, objs: make([]client.Object, 0, len(m.objs)+1), gvks: make([]schema.GroupVersionKind, 0, len(m.objs)+1), indexes: m.indexes}
	for i, o := range m.objs {
		if m.gvks[i] == gvk && client.ObjectKeyFromObject(o) == key {
			continue
		}
		out.objs, out.gvks = append(out.objs, o), append(out.gvks, m.gvks[i])
	}
	if ch.new != nil {
		out.objs, out.gvks = append(out.objs, ch.new), append(out.gvks, gvk)
	}
	return out
}

func newMemoryReader(scheme *runtime.Scheme, objs []client.Object) *memoryReader {
	m := &memoryReader{scheme: scheme, objs: objs, gvks: make([]schema.GroupVersionKind, len(objs))}
	for i, o := range objs {
		m.gvks[i], _ = apiutil.GVKForObject(o, scheme)
	}
	return m
}

func (m *memoryReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, m.scheme)
	if err != nil {
		return err
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		for i, o := range m.objs {
			if m.gvks[i] == gvk && o.GetName() == key.Name && o.GetNamespace() == key.Namespace {
				content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
				if err != nil {
					return err
				}
				u.SetUnstructuredContent(content)
				u.SetGroupVersionKind(gvk)
				return nil
			}
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	}
	for _, o := range m.objs {
		if o.GetName() != key.Name || o.GetNamespace() != key.Namespace {
			continue
		}
		if reflect.TypeOf(o) != reflect.TypeOf(obj) {
			continue
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
		return nil
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
}

func (m *memoryReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	gvk, err := apiutil.GVKForObject(list, m.scheme)
	if err != nil {
		return err
	}
	itemKind := strings.TrimSuffix(gvk.Kind, "List")
	var items []runtime.Object
	for i, o := range m.objs {
		if ogvk := m.gvks[i]; ogvk.Kind != itemKind || ogvk.Group != gvk.Group {
			continue
		}
		if lo.Namespace != "" && o.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
			ok, err := m.matchesFields(m.gvks[i], o, lo.FieldSelector)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		items = append(items, o.DeepCopyObject())
	}
	return meta.SetList(list, items)
}

// volatile fields differ between runs that reach the same state.
var volatile = map[string]bool{
	"resourceVersion": true, "managedFields": true, "creationTimestamp": true, "uid": true,
	"lastTransitionTime": true, "deletionTimestamp": true, "takenAt": true,
}

// endState renders every object, normalised (volatile fields out, keyed
// lists sorted), keyed by kind/namespace/name: what the differential oracle
// compares.
func (r *runner) endState(ctx context.Context) (map[string]map[string]any, error) {
	objs, err := r.listAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(objs))
	for _, obj := range objs {
		if r.hooks.History != nil && r.hooks.History(obj) {
			continue
		}
		kind := fmt.Sprintf("%T", obj)
		if gvk, err := apiutil.GVKForObject(obj, r.target.Scheme); err == nil {
			kind = gvk.Kind
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("normalising %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
		}
		strip(m, r.hooks.VolatileFields)
		out[kind+"/"+obj.GetNamespace()+"/"+obj.GetName()] = m
	}
	return out, nil
}

func strip(v any, extra []string) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if volatile[k] || slices.Contains(extra, k) {
				delete(t, k)
				continue
			}
			strip(child, extra)
		}
	case []any:
		for _, child := range t {
			strip(child, extra)
		}
		sortKeyed(t)
	}
}

// sortKeyed orders a list of objects keyed by type or name (conditions,
// members), whose order carries no meaning but would otherwise show as a
// difference between runs.
func sortKeyed(list []any) {
	for _, key := range []string{"type", "name"} {
		keyed := true
		for _, it := range list {
			m, ok := it.(map[string]any)
			if _, has := m[key]; !ok || !has {
				keyed = false
				break
			}
		}
		if keyed {
			sort.SliceStable(list, func(i, j int) bool {
				return fmt.Sprint(list[i].(map[string]any)[key]) < fmt.Sprint(list[j].(map[string]any)[key])
			})
			return
		}
	}
}

// RunDifferential runs the schedule, and if no invariant broke, runs its
// inputs again without faults and compares the end states.
func RunDifferential(ctx context.Context, t Target, s Schedule, o Options) (*Result, error) {
	return runDifferential(ctx, t, s, o, nil)
}

func runDifferential(ctx context.Context, t Target, s Schedule, o Options, cache *baselines) (*Result, error) {
	res, err := Run(ctx, t, s, o)
	if err != nil || res.Violation != nil || len(s.Faults()) == 0 {
		return res, err
	}
	base, err := cache.run(ctx, t, s.WithoutFaults(), o)
	if err != nil {
		return nil, fmt.Errorf("baseline run: %w", err)
	}
	if base.Violation != nil {
		res.Violation = base.Violation
		res.Trace = base.Trace
		return res, nil
	}
	if diff := cmp.Diff(base.End, res.End); diff != "" {
		res.Violation = &Violation{Invariant: "same end state as the fault-free run", Kind: "differential", Step: -1,
			Err: fmt.Errorf("end states differ (-without faults +with faults):\n%s", diff)}
	}
	return res, nil
}

// baselines remembers fault-free runs by their inputs. A run is a pure
// function of its schedule, so schedules that perturb the same input script
// (consecutive seeds, see Config.FaultVariants, and every candidate while
// shrinking) need its fault-free twin only once. A nil cache runs every time.
type baselines struct {
	mu      sync.Mutex
	entries map[string]*baseline
	order   []string // oldest first, for eviction
}

type baseline struct {
	once sync.Once
	res  *Result
	err  error
}

// baselinesKept bounds the cache: seeds are explored in order, so the
// scripts in use at any moment are few.
const baselinesKept = 64

func newBaselines() *baselines { return &baselines{entries: map[string]*baseline{}} }

func (c *baselines) run(ctx context.Context, t Target, inputs Schedule, o Options) (*Result, error) {
	if c == nil {
		return Run(ctx, t, inputs, o)
	}
	key := fmt.Sprint(inputs.Actions)
	c.mu.Lock()
	b, ok := c.entries[key]
	if !ok {
		b = &baseline{}
		c.entries[key] = b
		c.order = append(c.order, key)
		if len(c.order) > baselinesKept {
			delete(c.entries, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	b.once.Do(func() { b.res, b.err = Run(ctx, t, inputs, o) })
	return b.res, b.err
}

// Shrink reduces a failing schedule to a minimal set of faults that still
// breaks the same invariant: it drops faults one at a time while the failure
// persists, until no single fault can go.
func Shrink(ctx context.Context, t Target, failing *Result, o Options) (*Result, error) {
	want := failing.Violation.Invariant
	base := newBaselines()
	kept := failing.Schedule.Faults()
	best := failing
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(kept); i++ {
			candidate := append(append([]int(nil), kept[:i]...), kept[i+1:]...)
			res, err := runDifferential(ctx, t, failing.Schedule.Keep(candidate), o, base)
			if err != nil {
				return nil, err
			}
			if res.Violation != nil && res.Violation.Invariant == want {
				kept, best, changed = candidate, res, true
				i--
			}
		}
	}
	return best, nil
}

// FormatFailure renders a failure: the seed, the minimal faults, the trace
// and the replay command.
func FormatFailure(res *Result, replay string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %v\n", res.Schedule.Seed, res.Violation)
	faults := res.Schedule.Faults()
	sort.Ints(faults)
	fmt.Fprintf(&b, "minimal faults (%d): %v\nschedule:\n%s", len(faults), faults, res.Schedule.Describe(res.Perturbations))
	fmt.Fprintf(&b, "trace:\n  %s\n", strings.Join(res.Trace, "\n  "))
	fmt.Fprintf(&b, "replay: %s\n", replay)
	return b.String()
}

// restMappers caches one REST mapper per scheme: building one walks every
// kind and costs more than a whole simulated run.
var restMappers sync.Map

func restMapperFor(s *runtime.Scheme) meta.RESTMapper {
	if m, ok := restMappers.Load(s); ok {
		return m.(meta.RESTMapper)
	}
	m, _ := restMappers.LoadOrStore(s, testrestmapper.TestOnlyStaticRESTMapper(s))
	return m.(meta.RESTMapper)
}
