package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// readStart keeps the state the starting resource converged to, when the
// assertions ask whether the run's changes show (a fault-free twin's
// are judged in the faulted run).
func (r *run) readStart(ctx context.Context) error {
	if !r.s.Spec.Assertions.ChangesShow || r.twin {
		return nil
	}
	r.startRead = time.Now()
	st, err := compare.Capture(ctx, r.e.Dynamic, r.gvr, r.ns, r.obj.GetName())
	r.start = st
	if err != nil {
		return err
	}
	return r.e.learnSwitches(ctx, r.obj)
}

// learnSwitches reads, once per kind, the booleans of obj's spec schema
// that are off unless set (space.Switches).
func (e *Engine) learnSwitches(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.switches[gvk]; ok {
		return nil
	}
	versions, err := e.ServedVersions(ctx, obj)
	if err != nil {
		return err
	}
	if e.switches == nil {
		e.switches = map[schema.GroupVersionKind][]string{}
	}
	e.switches[gvk] = space.Switches(versions[0].Spec)
	return nil
}

// effectCheck is the effect oracle's check: the spec fields the run
// changed that left the status and every child as the starting resource
// converged to (compare.Unshown).
func (r *run) effectCheck(ctx context.Context) (report.Check, error) {
	end, err := compare.Capture(ctx, r.e.Dynamic, r.gvr, r.ns, r.obj.GetName())
	if err != nil {
		return report.Check{}, fmt.Errorf("reading the end state for the effect oracle: %w", err)
	}
	c := report.Check{Kind: "effect", Name: "spec changes show in the status or a child", Value: "shown", Budget: "a changed field named like a child's, or a feature turned on, shows"}
	r.e.mu.Lock()
	switches := r.e.switches[r.obj.GroupVersionKind()]
	r.e.mu.Unlock()
	if fields := compare.Unshown(r.start, end, switches); len(fields) > 0 {
		c.Value, c.Where = "ignored", fields[0]
		c.Violation = fmt.Sprintf("the operator took %s and changed nothing: the status and every child end as the starting resource left them, though children hold fields of those names or the change turns a feature on",
			strings.Join(fields, ", "))
		if refused := r.refusedWrites(r.startRead); len(refused) > 0 {
			c.Violation += "; the API server refused its writes since: " + strings.Join(refused, ", ")
		}
		r.e.logf("%s: %s", r.s.Metadata.Name, c.Violation)
	}
	return c, nil
}

// refusedWrites are the operator's writes through the proxy since then
// that the API server refused: an operator that retries a child it
// cannot write, and says so only in its log.
func (r *run) refusedWrites(since time.Time) []string {
	if r.e.view == nil {
		return nil
	}
	return apiproxy.RefusedWrites(r.e.view.Proxy.Requests(), since)
}
