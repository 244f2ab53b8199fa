package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"
)

// EnvStep is something the world does between reconcile passes, such as a
// simulator's Step; it reports whether it changed anything.
type EnvStep func(ctx context.Context) (changed bool, err error)

// Driver runs a reconciler pass by pass against a client, with the world
// (simulators) moving between passes, and tells when it has settled.
type Driver struct {
	// Reconciler under test. Its client must be Writes.Wrap(...) so that its
	// writes are seen.
	Reconciler reconcile.Reconciler
	// Writes records the reconciler's writes.
	Writes *WriteLog
	// Env runs after every pass, in order.
	Env []EnvStep
	// Client, Namespace and Kinds say what to snapshot for the diff printed
	// when a run does not settle: every object of these list kinds in the
	// namespace.
	Client    client.Client
	Namespace string
	Kinds     []client.ObjectList
	// MaxPasses bounds ReconcileUntilStable; 20 when zero.
	MaxPasses int
}

// Pass is the record of one reconcile pass and the world step after it.
type Pass struct {
	Result     reconcile.Result
	Err        error
	Writes     []Write
	EnvChanged bool
}

func (p Pass) String() string {
	s := fmt.Sprintf("result=%+v err=%v writes=%d envChanged=%v", p.Result, p.Err, len(p.Writes), p.EnvChanged)
	if len(p.Writes) > 0 {
		s += "\n" + FormatWrites(p.Writes)
	}
	return s
}

// Settled is true when neither the reconciler nor the world changed anything.
func (p Pass) Settled() bool { return len(p.Writes) == 0 && !p.EnvChanged }

// Pass runs one reconcile pass, then the world's steps.
func (d *Driver) Pass(ctx context.Context, req reconcile.Request) (Pass, error) {
	mark := d.Writes.Len()
	res, err := d.Reconciler.Reconcile(ctx, req)
	p := Pass{Result: res, Err: err, Writes: d.Writes.Since(mark)}
	for _, step := range d.Env {
		changed, err := step(ctx)
		if err != nil {
			return p, fmt.Errorf("environment step: %w", err)
		}
		p.EnvChanged = p.EnvChanged || changed
	}
	return p, nil
}

// ReconcileUntilStable runs passes until one pass changes nothing, neither by
// the reconciler's writes nor by the world's steps. It returns the passes
// run. If the run does not settle within MaxPasses, the error names the
// writes of the last pass and diffs every snapshotted object across it: a
// hot loop shows as the field two writers keep flipping.
func (d *Driver) ReconcileUntilStable(ctx context.Context, req reconcile.Request) ([]Pass, error) {
	limit := d.MaxPasses
	if limit == 0 {
		limit = 20
	}
	var passes []Pass
	for range limit - 1 {
		p, err := d.Pass(ctx, req)
		passes = append(passes, p)
		if err != nil {
			return passes, err
		}
		if p.Settled() {
			return passes, nil
		}
	}
	before, err := d.Snapshot(ctx)
	if err != nil {
		return passes, err
	}
	p, err := d.Pass(ctx, req)
	passes = append(passes, p)
	if err != nil || p.Settled() {
		return passes, err
	}
	after, err := d.Snapshot(ctx)
	if err != nil {
		return passes, err
	}
	return passes, fmt.Errorf("not stable after %d passes; the last pass: %s\nobjects changed by the last pass (-before +after):\n%s",
		limit, p, cmp.Diff(before, after))
}

// ExpectIdempotent runs one more pass on a settled world and fails unless it
// writes nothing and leaves every snapshotted object unchanged.
func (d *Driver) ExpectIdempotent(ctx context.Context, req reconcile.Request) error {
	before, err := d.Snapshot(ctx)
	if err != nil {
		return err
	}
	p, err := d.Pass(ctx, req)
	if err != nil {
		return err
	}
	after, err := d.Snapshot(ctx)
	if err != nil {
		return err
	}
	if !p.Settled() || !cmp.Equal(before, after) {
		return fmt.Errorf("a pass on a settled world was not idempotent: %s\n(-before +after):\n%s", p, cmp.Diff(before, after))
	}
	return nil
}

// Snapshot renders every object of the driver's kinds in its namespace as
// YAML without managed fields, keyed by kind/name.
func (d *Driver) Snapshot(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, proto := range d.Kinds {
		list := proto.DeepCopyObject().(client.ObjectList)
		if err := d.Client.List(ctx, list, client.InNamespace(d.Namespace)); err != nil {
			return nil, fmt.Errorf("snapshot: listing %T: %w", list, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			obj := item.(client.Object)
			obj.SetManagedFields(nil)
			kind := fmt.Sprintf("%T", obj)
			if gvk, err := apiutil.GVKForObject(obj, d.Client.Scheme()); err == nil {
				kind = gvk.Kind
			}
			data, err := yaml.Marshal(obj)
			if err != nil {
				return nil, err
			}
			out[kind+"/"+obj.GetName()] = string(data)
		}
	}
	return out, nil
}

// Keys lists a snapshot's keys, sorted.
func Keys(snapshot map[string]string) string {
	keys := make([]string, 0, len(snapshot))
	for k := range snapshot {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
