package sim

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/gauntlet-dev/gauntlet/framework/endstate"
)

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
	if diffs := endstate.Objects(base.End, res.End); len(diffs) > 0 {
		var b strings.Builder
		for _, d := range diffs {
			fmt.Fprintf(&b, "\n  %s: %s without faults, %s with them", d.Path, d.A, d.B)
		}
		res.Violation = &Violation{Invariant: "same end state as the fault-free run", Kind: "differential", Step: -1,
			Err: fmt.Errorf("end states differ in %d places:%s", len(diffs), b.String())}
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

// baselinesKept bounds the cache: seeds are run in order, so the
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
