package engine

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// processKey stands for the operator's process on envtest where a pod
// UID names an operator pod.
const processKey = "process"

// operatorState is the operator's pods and metrics at one moment.
type operatorState struct {
	uids     map[string]int32                        // pod UID -> restarts
	families map[string]*dto.MetricFamily            // every pod's, put together
	each     map[string]map[string]*dto.MetricFamily // pod UID -> its own
}

func (r *run) operatorState(ctx context.Context) (operatorState, error) {
	if h := r.e.host; h != nil {
		s := operatorState{uids: map[string]int32{processKey: int32(h.Restarts())}}
		var err error
		if r.e.operator.Metrics != nil {
			err = s.scrape(ctx, r)
		}
		return s, err
	}
	pods, err := r.e.operatorPods(ctx)
	if err != nil {
		return operatorState{}, err
	}
	s := operatorState{uids: map[string]int32{}}
	for _, p := range pods {
		var n int32
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
		s.uids[string(p.UID)] = n
	}
	if r.e.operator.Metrics != nil {
		if err := s.scrape(ctx, r); err != nil {
			return s, err
		}
	}
	return s, nil
}

// scrape reads the operator's metrics into s, pod by pod and together.
func (s *operatorState) scrape(ctx context.Context, r *run) error {
	each, err := r.scrapeEach(ctx)
	if err != nil {
		return err
	}
	s.each, s.families = each, mergeEach(each)
	return nil
}

// counterRise is how much a counter rose between two states, pod by
// pod: a pod that is new, or whose containers restarted, counts from
// zero (its counters began again with its process), the others from
// their value before. A pod that was there before but not read then
// (not ready yet) has no value to count from and is left out: a missed
// rise, never a false one.
func counterRise(before, after operatorState, name string, labels map[string]string) float64 {
	var rise float64
	for uid, fams := range after.each {
		now := framework.SumSamples(fams, name, labels)
		was, there := before.uids[uid]
		switch prior, read := before.each[uid]; {
		case !there || was != after.uids[uid]:
			rise += now
		case read:
			rise += now - framework.SumSamples(prior, name, labels)
		}
	}
	return rise
}

// knownController checks, from a first scrape, that the controller the
// Operator file names for the reconcile counters is one the operator has
// (controller-runtime gives each of its controllers its series from the
// start): a misspelt name would leave every counter check at zero.
func (e *Engine) knownController(families map[string]*dto.MetricFamily) error {
	m := e.operator.Metrics
	if m == nil || m.Controller == "" || families == nil {
		return nil
	}
	const total = "controller_runtime_reconcile_total"
	var names []string
	if mf := families[total]; mf != nil {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "controller" && !slices.Contains(names, l.GetValue()) {
					names = append(names, l.GetValue())
				}
			}
		}
	}
	if slices.Contains(names, m.Controller) {
		return nil
	}
	slices.Sort(names)
	if len(names) == 0 {
		return fmt.Errorf("spec.metrics.controller %q: the operator's metrics have no %s series, so no controller to count (is it a controller-runtime operator, and spec.metrics its endpoint?)", m.Controller, total)
	}
	return fmt.Errorf("spec.metrics.controller %q: the operator has no such controller; its metrics name %s", m.Controller, scenario.QuoteAll(names))
}

// restarts counts container restarts and replaced pods between two states.
func restarts(before, after operatorState) int {
	n := 0
	for uid, rs := range after.uids {
		if b, ok := before.uids[uid]; ok {
			n += int(rs - b)
		} else {
			n += 1 + int(rs)
		}
	}
	return n
}

// operatorChecks judges the operator: restarts, metrics, owned objects
// left alone once converged.
func (r *run) operatorChecks(ctx context.Context, before operatorState) error {
	a := r.s.Spec.Assertions
	f := &r.res.Figures
	after, err := r.operatorState(ctx)
	if after.uids != nil {
		// Known even when the metrics are not: a crash-looping operator
		// does not answer its scrape, and its restarts say why.
		f.OperatorRestarts = restarts(before, after)
		c := report.Check{Kind: "operator", Name: "operator restarts", Value: fmt.Sprint(f.OperatorRestarts), Budget: fmt.Sprintf("≤ %d", a.OperatorRestarts)}
		if f.OperatorRestarts > a.OperatorRestarts {
			c.Violation = fmt.Sprintf("operator restarted %d times (budget %d)", f.OperatorRestarts, a.OperatorRestarts)
			if h := r.e.host; h != nil {
				if p, fn := h.LastPanic(); p != "" {
					c.Violation += "; it last exited with " + p
					if fn != "" {
						c.Where = "panic in " + fn
					}
				}
			}
		}
		r.res.Checks = append(r.res.Checks, c)
	}
	if err != nil {
		return fmt.Errorf("reading the operator after the heal: %w", err)
	}
	if m := r.e.operator.Metrics; m != nil {
		panics := scenario.MetricAssertion{Name: "controller_runtime_reconcile_panics_total", MaxIncrease: new(float64)}
		if m.Controller != "" {
			panics.Labels = map[string]string{"controller": m.Controller}
		}
		for _, ma := range append([]scenario.MetricAssertion{panics}, a.Metrics...) {
			c, err := r.metricCheck(ctx, ma, before, &after)
			if err != nil {
				return err
			}
			r.res.Checks = append(r.res.Checks, c)
		}
	}
	stable := defaultStableFor
	if a.StableFor != nil {
		stable = a.StableFor.Duration
	}
	if stable > 0 {
		r.awaitQuiet(ctx, quietBeforeStillness, quietWithin)
		since := time.Now()
		errors0, scraped := r.reconcileErrors(ctx)
		changed, err := r.unstable(ctx, stable)
		if err != nil {
			return fmt.Errorf("watching owned objects after convergence: %w", err)
		}
		if r.e.view != nil {
			writes := r.stateWriteList(since)
			c := report.Check{Kind: "operator", Name: "operator writes once converged", Value: fmt.Sprint(len(writes)), Budget: fmt.Sprintf("0 in %s", stable)}
			if n := len(writes); n > 0 {
				c.Violation = fmt.Sprintf("the operator kept writing after convergence: %d writes in %s, first %s (a settled operator writes nothing)", n, stable, writes[0])
			}
			r.res.Checks = append(r.res.Checks, c)
		}
		if errors1, ok := r.reconcileErrors(ctx); ok && scraped && r.e.view != nil {
			c := report.Check{Kind: "operator", Name: "reconcile errors once converged", Value: fmt.Sprintf("+%v", errors1-errors0), Budget: fmt.Sprintf("+0 in %s", stable)}
			if errors1 > errors0 {
				c.Violation = fmt.Sprintf("reconcile errors kept rising after convergence: +%v in %s (an error loop that does not end)", errors1-errors0, stable)
			}
			r.res.Checks = append(r.res.Checks, c)
		}
		f.UnstableObjects = changed
		c := report.Check{Kind: "operator", Name: "owned objects stable once converged", Value: "unchanged", Budget: "unchanged for " + stable.String()}
		if len(changed) > 0 {
			c.Value = fmt.Sprint(changed)
			c.Violation = "owned objects still changing after convergence: " + fmt.Sprint(changed)
		}
		r.res.Checks = append(r.res.Checks, c)
	}
	return nil
}

// metricCheck judges one metric: its rise over the run, or its value
// after the heal (polled for up to a minute, as a queue drains).
func (r *run) metricCheck(ctx context.Context, ma scenario.MetricAssertion, before operatorState, after *operatorState) (report.Check, error) {
	name := framework.MetricSelector(ma.Name, ma.Labels)
	if ma.MaxIncrease != nil {
		if framework.CountSeries(before.families, ma.Name, ma.Labels)+framework.CountSeries(after.families, ma.Name, ma.Labels) == 0 {
			return absentMetric(name+" rise", fmt.Sprintf("≤ %v", *ma.MaxIncrease)), nil
		}
		rise := counterRise(before, *after, ma.Name, ma.Labels)
		c := report.Check{Kind: "operator", Name: name + " rise", Value: fmt.Sprintf("+%v", rise), Budget: fmt.Sprintf("≤ %v", *ma.MaxIncrease)}
		if rise > *ma.MaxIncrease {
			c.Violation = fmt.Sprintf("%s rose by %v (budget %v)", name, rise, *ma.MaxIncrease)
		}
		if ma.Name == "controller_runtime_reconcile_panics_total" {
			r.res.Figures.PanicsDelta = rise
		}
		if ma.Name == "controller_runtime_reconcile_errors_total" {
			r.res.Figures.ErrorsDelta = rise
		}
		return c, nil
	}
	want := *ma.EqualsAfter
	var got float64
	err := framework.PollFor(ctx, fmt.Sprintf("%s to be %v", name, want), metricSettleWithin, time.Second, func(ctx context.Context) (bool, string, error) {
		fams, err := r.scrapeOperator(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		after.families = fams
		got = framework.SumSamples(fams, ma.Name, ma.Labels)
		return got == want, fmt.Sprintf("%v", got), nil
	})
	if err == nil && framework.CountSeries(after.families, ma.Name, ma.Labels) == 0 {
		return absentMetric(name+" after the heal", fmt.Sprint(want)), nil
	}
	c := report.Check{Kind: "operator", Name: name + " after the heal", Value: fmt.Sprint(got), Budget: fmt.Sprint(want)}
	switch {
	case err != nil && framework.CountSeries(after.families, ma.Name, ma.Labels) == 0:
		c.Value = "not exposed"
		c.Violation = fmt.Sprintf("the operator's metrics have no series %s after the heal (want %v)", name, want)
	case err != nil:
		c.Violation = fmt.Sprintf("%s is %v after the heal (want %v)", name, got, want)
	}
	if ma.Name == "workqueue_depth" {
		r.res.Figures.WorkqueueDepth = got
	}
	return c, nil
}

// absentMetric is the check of a metric the operator's endpoint exposes
// no series of: a sum over nothing is no figure, so it is not judged and
// says so, rather than read as a rise of 0 (an operator not built on
// controller-runtime has no reconcile panics series; a counter with
// labels appears only once it has counted something; a name or label
// may be misspelt).
func absentMetric(name, budget string) report.Check {
	return report.Check{Kind: "operator", Name: name, Value: "not exposed", Budget: "not judged (" + budget + "): the operator's metrics have no such series"}
}

// ownedWritten maps the objects the resource controls, of the kinds the
// end state compares (compare.ChildResources), to what the operator writes
// of them (compare.Written). Jobs and CronJobs are left out: Jobs come and
// go as they run and on each schedule, whatever the operator does.
func (r *run) ownedWritten(ctx context.Context) (map[string]map[string]any, error) {
	children, err := compare.List(ctx, r.e.Dynamic, r.ns, settled...)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	children.Each(func(_ schema.GroupVersionResource, key string, o *unstructured.Unstructured) {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.UID == r.obj.GetUID() {
			out[key] = compare.Written(o)
		}
	})
	return out, nil
}

// settled are the child kinds whose objects stop changing once the
// operator has: all but Jobs and CronJobs.
var settled = slices.DeleteFunc(slices.Clone(compare.ChildResources), func(gvr schema.GroupVersionResource) bool { return gvr.Group == "batch" })

// unstable returns the owned objects that what the operator writes
// (compare.Written) changed in over d, each with the paths that changed;
// a status that Kubernetes' controllers update is not the operator still
// at work.
func (r *run) unstable(ctx context.Context, d time.Duration) ([]string, error) {
	before, err := r.ownedWritten(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	after, err := r.ownedWritten(ctx)
	if err != nil {
		return nil, err
	}
	var changed []string
	for k, v := range after {
		was, ok := before[k]
		if !ok {
			changed = append(changed, k+" (made)")
			continue
		}
		if paths := compare.Changed(was, v); len(paths) > 0 {
			changed = append(changed, fmt.Sprintf("%s (%s)", k, strings.Join(compare.FirstFew(paths, shownPaths), ", ")))
		}
	}
	slices.Sort(changed)
	return changed, nil
}

// The stillness check's times.
const (
	// defaultStableFor is the stillness window when a scenario gives no
	// stableFor: a few of a controller-runtime operator's requeues.
	defaultStableFor = 10 * time.Second
	// quietBeforeStillness is the pause in state writes that says the
	// operator has settled; quietWithin bounds the wait for it.
	quietBeforeStillness = 2 * time.Second
	quietWithin          = 15 * time.Second
	// quietPoll is how often the wait for quiet looks again.
	quietPoll = 200 * time.Millisecond
	// shownPaths is how many changed paths an unstable object's line names.
	shownPaths = 3
)

// awaitQuiet waits, before the stillness window opens, until the
// operator made no state write for quiet (at most for bound): its last
// status write can trail the moment the converged expressions first hold
// by a reconcile, and a settled operator is one that stopped writing. One
// that never stops is caught by the window all the same.
func (r *run) awaitQuiet(ctx context.Context, quiet, bound time.Duration) {
	if r.e.view == nil {
		r.awaitStill(ctx, quiet, bound)
		return
	}
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		last := r.started
		for _, q := range r.e.view.Proxy.Requests() {
			if q.At.After(last) && q.StateWrite() {
				last = q.At
			}
		}
		if time.Since(last) >= quiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(quietPoll):
		}
	}
}

// awaitStill is awaitQuiet where no API proxy sees the operator's writes:
// it reads the resource and its children's written forms until neither
// has changed for quiet (at most for bound), so that the writes catching
// up with a heal fall before the stillness window, not inside it.
func (r *run) awaitStill(ctx context.Context, quiet, bound time.Duration) {
	deadline := time.Now().Add(bound)
	var last map[string]any
	since := time.Now()
	for time.Now().Before(deadline) {
		if now, err := r.writtenState(ctx); err == nil {
			switch {
			case !reflect.DeepEqual(now, last):
				last, since = now, time.Now()
			case time.Since(since) >= quiet:
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(quietPoll):
		}
	}
}

// writtenState is what the operator writes, read now: the resource (but
// for the fields the API server keeps) and its children's written forms.
func (r *run) writtenState(ctx context.Context) (map[string]any, error) {
	u, err := r.resource().Get(ctx, r.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	own := u.DeepCopy()
	unstructured.RemoveNestedField(own.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(own.Object, "metadata", "managedFields")
	children, err := r.ownedWritten(ctx)
	if err != nil {
		return nil, err
	}
	state := map[string]any{"resource": own.Object}
	for k, v := range children {
		state[k] = v
	}
	return state, nil
}

// metricSettleWithin is how long a metric asserted to equal a value after
// the fault gets to reach it: a few of the operator's passes and the
// scrape interval of its metrics endpoint.
const metricSettleWithin = time.Minute

// stateWrites counts the operator's successful writes through the proxy
// since a moment, leaving out Leases (leader election renews one every
// few seconds) and Events, which say what happened rather than change
// what is.
func (r *run) stateWrites(since time.Time) int { return len(r.stateWriteList(since)) }

// stateWriteList is those writes, each as the request reads.
func (r *run) stateWriteList(since time.Time) []string {
	if r.e.view == nil {
		return nil
	}
	return apiproxy.StateWrites(r.e.view.Proxy.Requests(), since)
}

// deletes counts the operator's deletes that succeeded since then, by
// resource and name (endState.Deleted).
func (r *run) deletes(since time.Time) map[string]int {
	if r.e.view == nil {
		return nil
	}
	return apiproxy.Deletes(r.e.view.Proxy.Requests(), since)
}

// reconcileErrors is the operator's controller_runtime_reconcile_errors_total
// for its controller, when its metrics are known and answer.
func (r *run) reconcileErrors(ctx context.Context) (float64, bool) {
	m := r.e.operator.Metrics
	if m == nil {
		return 0, false
	}
	fams, err := r.scrapeOperator(ctx)
	if err != nil {
		return 0, false
	}
	var labels map[string]string
	if m.Controller != "" {
		labels = map[string]string{"controller": m.Controller}
	}
	return framework.SumSamples(fams, "controller_runtime_reconcile_errors_total", labels), true
}

// restartOperator kills the operator, as a crash would, and returns once
// it runs again: on envtest its process started anew; on a cluster new
// pods ready in place of the killed ones (a webhook it serves answers
// again).
func (e *Engine) restartOperator(ctx context.Context) error {
	start := time.Now()
	if h := e.host; h != nil {
		n := h.Restarts()
		if err := h.Kill(); err != nil {
			return err
		}
		err := framework.PollFor(ctx, "the operator process to start again", operatorReadyWithin, 50*time.Millisecond, func(context.Context) (bool, string, error) {
			return h.Restarts() > n, fmt.Sprintf("started %d times after the first, %d before the kill", h.Restarts(), n), nil
		})
		if err == nil {
			e.logf("restarted the operator process in %s", time.Since(start).Round(time.Millisecond))
		}
		return err
	}
	killed, err := e.operatorPods(ctx)
	if err != nil {
		return err
	}
	if err := e.killOperatorPods(ctx); err != nil {
		return err
	}
	err = e.awaitOperatorReady(ctx, "the operator's pods to be ready again", start, killed)
	if err == nil {
		e.logf("restarted the operator's pods in %s", time.Since(start).Round(time.Millisecond))
	}
	return err
}
