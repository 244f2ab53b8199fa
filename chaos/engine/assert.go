package engine

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/workload"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// program is a compiled CEL expression over the resource.
type program struct {
	src string
	prg cel.Program
}

func compile(exprs []string) ([]program, error) {
	out := make([]program, 0, len(exprs))
	for _, e := range exprs {
		prg, err := scenario.CompileCEL(e)
		if err != nil {
			return nil, fmt.Errorf("CEL %q: %w", e, err)
		}
		out = append(out, program{src: e, prg: prg})
	}
	return out, nil
}

// eval runs the expression on an object; an error (a field not there yet)
// counts as false.
func (p program) eval(obj map[string]any) (bool, error) {
	v, _, err := p.prg.Eval(map[string]any{"self": obj})
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("%q gave %v, not a bool", p.src, v.Value())
	}
	return b, nil
}

// operatorState is the operator's pods and metrics at one moment.
type operatorState struct {
	uids     map[string]int32 // pod UID -> restarts
	families map[string]*dto.MetricFamily
}

func (r *run) operatorState(ctx context.Context) (operatorState, error) {
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
		if s.families, err = r.scrapeOperator(ctx); err != nil {
			return s, err
		}
	}
	return s, nil
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

// scrapeOperator reads the metrics of a running operator pod.
func (r *run) scrapeOperator(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	m := r.e.operator.Metrics
	pods, err := r.e.operatorPods(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		pf, err := framework.ForwardPort(ctx, r.e.Config, p.Namespace, p.Name, int(m.Port))
		if err != nil {
			return nil, err
		}
		defer pf.Close()
		path := m.Path
		if path == "" {
			path = "/metrics"
		}
		return framework.Scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", pf.Local, path))
	}
	return nil, fmt.Errorf("no running operator pod in %s", r.e.operator.Namespace)
}

// judge turns every assertion into a check.
func (r *run) judge(ctx context.Context, tl *Timeline, ledger *workload.Ledger, before operatorState) error {
	a := r.s.Spec.Assertions
	ph := r.res.Phases
	from := map[string]time.Time{scenario.FromRequested: ph.Requested, scenario.FromInjected: ph.Injected, scenario.FromHealed: ph.Healed}
	recovered, back := recoveredAt(r.res.Series.Pods, r.targets, ph.Healed)
	if back {
		from[scenario.FromRecovered] = recovered
	}
	f := &r.res.Figures
	f.TimeToDegraded, f.TimeToAvailable, f.DegradedClears = -1, -1, -1

	// The conventional conditions' figures, for the summary, whether or
	// not the file asserts them.
	if t, ok := tl.First("Degraded", metav1.ConditionTrue, ph.Injected); ok {
		f.TimeToDegraded = t.Sub(ph.Injected)
	}
	if t, ok := tl.First("Available", metav1.ConditionTrue, ph.Healed); ok {
		f.TimeToAvailable = t.Sub(ph.Healed)
	}
	if back {
		if t, ok := tl.First("Degraded", metav1.ConditionFalse, recovered); ok {
			f.DegradedClears = t.Sub(recovered)
		}
	}
	for _, ca := range a.Conditions {
		c, err := r.conditionCheck(tl, ca, from)
		if err != nil {
			return err
		}
		r.res.Checks = append(r.res.Checks, c)
	}

	if ledger != nil {
		if err := r.workloadChecks(ctx, ledger); err != nil {
			return err
		}
	}

	// The operator: restarts, metrics, owned objects left alone.
	after, err := r.operatorState(ctx)
	if err != nil {
		return fmt.Errorf("reading the operator after the heal: %w", err)
	}
	f.OperatorRestarts = restarts(before, after)
	c := report.Check{Kind: "operator", Name: "operator restarts", Value: fmt.Sprint(f.OperatorRestarts), Budget: fmt.Sprintf("≤ %d", a.OperatorRestarts)}
	if f.OperatorRestarts > a.OperatorRestarts {
		c.Violation = fmt.Sprintf("operator restarted %d times (budget %d)", f.OperatorRestarts, a.OperatorRestarts)
	}
	r.res.Checks = append(r.res.Checks, c)
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
	stable := 10 * time.Second
	if a.StableFor != nil {
		stable = a.StableFor.Duration
	}
	if stable > 0 {
		changed, err := r.unstable(ctx, stable)
		if err != nil {
			return fmt.Errorf("watching owned objects after convergence: %w", err)
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

// conditionCheck judges one condition assertion from the timeline.
func (r *run) conditionCheck(tl *Timeline, ca scenario.ConditionAssertion, from map[string]time.Time) (report.Check, error) {
	what := ca.Type
	var prg *program
	if ca.CEL != "" {
		ps, err := compile([]string{ca.CEL})
		if err != nil {
			return report.Check{}, err
		}
		prg, what = &ps[0], ca.CEL
		if ca.Name != "" {
			what = ca.Name
		}
	}
	ph := r.res.Phases
	if ca.Never != "" {
		c := report.Check{Kind: "condition", Name: fmt.Sprintf("%s never %s during the fault", what, ca.Never), Value: "held", Budget: "never " + ca.Never}
		var ever bool
		if prg != nil {
			ever = everCEL(tl, *prg, ca.Never == "true", ph.Requested, ph.Healed)
		} else {
			ever = tl.Ever(ca.Type, metav1.ConditionStatus(ca.Never), ph.Requested, ph.Healed)
		}
		if ever {
			c.Value = "turned " + ca.Never
			c.Violation = fmt.Sprintf("%s turned %s during the fault", what, ca.Never)
		}
		if ca.Type == "Available" && ca.Never == "False" {
			r.res.Figures.AvailableFalse = ever
		}
		return c, nil
	}
	c := report.Check{Kind: "condition", Name: fmt.Sprintf("%s=%s after %s", what, ca.Status, ca.After), Budget: "≤ " + ca.Within.Duration.String()}
	t0, known := from[ca.After]
	if ca.After == scenario.FromRecovered && !known {
		c.Value = "-"
		c.Violation = fmt.Sprintf("the fault's targets %v were not all ready again after the heal, so %s=%s cannot be timed from their recovery", r.targets, what, ca.Status)
		return c, nil
	}
	if typ, status, ok := scenario.ConditionMoment(ca.After); ok && !known {
		if t0, known = tl.First(typ, metav1.ConditionStatus(status), ph.Requested); !known {
			c.Value = "-"
			c.Violation = fmt.Sprintf("%s never happened after the request, so %s=%s cannot be timed from it", ca.After, what, ca.Status)
			return c, nil
		}
	}
	var at time.Time
	var ok bool
	if prg != nil {
		at, ok = firstCEL(tl, *prg, ca.Status == "true", t0)
	} else {
		at, ok = tl.First(ca.Type, metav1.ConditionStatus(ca.Status), t0)
	}
	d := time.Duration(-1)
	if ok {
		d = at.Sub(t0)
	}
	c.Value = report.FormatDuration(d)
	switch {
	case !ok:
		c.Violation = fmt.Sprintf("%s=%s never happened after %s (budget %s)", what, ca.Status, ca.After, ca.Within.Duration)
	case d > ca.Within.Duration:
		c.Violation = fmt.Sprintf("%s=%s %s after %s, over the budget of %s", what, ca.Status, report.FormatDuration(d), ca.After, ca.Within.Duration)
	}
	return c, nil
}

// firstCEL is when, at or after from, the expression first gave want.
func firstCEL(tl *Timeline, p program, want bool, from time.Time) (time.Time, bool) {
	objs := tl.Objects()
	var inForce *ObjectSample
	for i := range objs {
		if objs[i].At.After(from) {
			break
		}
		inForce = &objs[i]
	}
	if inForce != nil {
		if v, err := p.eval(inForce.Object); err == nil && v == want {
			return from, true
		}
	}
	for _, o := range objs {
		if o.At.After(from) {
			if v, err := p.eval(o.Object); err == nil && v == want {
				return o.At, true
			}
		}
	}
	return time.Time{}, false
}

// everCEL tells whether the expression gave want at any moment in [from, to].
func everCEL(tl *Timeline, p program, want bool, from, to time.Time) bool {
	at, ok := firstCEL(tl, p, want, from)
	return ok && !at.After(to)
}

// recoveredAt is when, after healed, every pod of targets was ready for
// good (a pod replaced under the same name counts once its replacement
// is), read from the observer's pod events: a pod that was ready at the
// heal and stayed so counts from the heal.
func recoveredAt(events []report.PodEvent, targets []Pods, healed time.Time) (time.Time, bool) {
	at := healed
	for _, t := range targets {
		for _, name := range t.Names {
			key := t.Namespace + "/" + name
			ready, since := true, time.Time{} // pods are ready before a scenario's fault
			for _, e := range events {
				if e.Pod != key {
					continue
				}
				switch e.Event {
				case report.PodReady:
					ready, since = true, e.At
				case report.PodNotReady, report.PodDeleted, report.PodCreated:
					ready = false
				}
			}
			if !ready {
				return time.Time{}, false
			}
			if since.After(at) {
				at = since
			}
		}
	}
	return at, true
}

// workloadChecks verifies the data and bounds the workload's figures.
func (r *run) workloadChecks(ctx context.Context, ledger *workload.Ledger) error {
	f := &r.res.Figures
	counts := ledger.Counts()
	f.AckedWrites, f.AmbiguousWrites = counts.AckedWrites, counts.AmbiguousWrites
	vctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	_, lost, err := ledger.VerifyDurability(vctx, r.kv)
	cancel()
	if err != nil {
		return fmt.Errorf("reading back the acknowledged writes: %w", err)
	}
	f.WritesLost = len(lost)
	c := report.Check{Kind: "workload", Name: "acknowledged writes lost", Value: fmt.Sprint(len(lost)), Budget: "0"}
	if len(lost) > 0 {
		c.Violation = fmt.Sprintf("%d acknowledged writes lost, the first %s=%s (revision %d): %s", len(lost), lost[0].Op.Key, lost[0].Op.Value, lost[0].Op.Revision, lost[0].Reason)
	}
	r.res.Checks = append(r.res.Checks, c)
	lin, err := ledger.CheckLinearizable(time.Minute, r.res.Artifacts)
	if err != nil {
		return fmt.Errorf("checking linearizability: %w", err)
	}
	f.Linearizable, f.Operations = string(lin.Result), lin.Operations
	c = report.Check{Kind: "workload", Name: "history linearizable", Value: f.Linearizable, Budget: "Ok"}
	if f.Linearizable != "Ok" {
		c.Violation = "history not proven linearizable: " + f.Linearizable
	}
	r.res.Checks = append(r.res.Checks, c)

	ph := r.res.Phases
	f.OpsDuringFault = ledger.Acknowledged(ph.Injected.Sub(ledger.Start), ph.Healed.Sub(ledger.Start))
	if base := ph.Requested.Sub(ledger.Start); base >= time.Second {
		rate := float64(ledger.Acknowledged(0, base)) / base.Seconds()
		f.FaultFreeOps = int(math.Round(rate * ph.Healed.Sub(ph.Injected).Seconds()))
	}
	inj := ph.Requested
	gap, resumed := ledger.LongestWriteGap(inj.Sub(ledger.Start), r.res.Phases.Converged.Sub(ledger.Start))
	f.LongestWriteGap = gap
	if gap >= writeStall {
		f.WritesResumeAfter = resumed - inj.Sub(ledger.Start)
	}
	wa := r.s.Spec.Assertions.Workload
	if wa == nil {
		return nil
	}
	if wa.WritesResumeWithin.Duration > 0 {
		c := report.Check{Kind: "workload", Name: "writes resume after the fault", Value: report.FormatDuration(f.WritesResumeAfter), Budget: "≤ " + wa.WritesResumeWithin.Duration.String()}
		if f.WritesResumeAfter > wa.WritesResumeWithin.Duration {
			c.Violation = fmt.Sprintf("writes resumed %s after the fault, over the budget of %s", report.FormatDuration(f.WritesResumeAfter), wa.WritesResumeWithin.Duration)
		}
		r.res.Checks = append(r.res.Checks, c)
	}
	if share := wa.MinFaultFreeShare; share != nil {
		c := report.Check{Kind: "workload", Name: "operations during the fault, against a fault-free stretch as long",
			Value: fmt.Sprintf("%d of %d", f.OpsDuringFault, f.FaultFreeOps), Budget: fmt.Sprintf("≥ %.0f%%", *share*100)}
		switch {
		case f.FaultFreeOps == 0:
			c.Violation = "no fault-free rate was measured before the fault (the workload acknowledged nothing in its baseline)"
		case float64(f.OpsDuringFault) < *share*float64(f.FaultFreeOps):
			c.Violation = fmt.Sprintf("%d operations acknowledged during the fault, %.0f%% of the %d a fault-free stretch as long gives (at least %.0f%% needed)",
				f.OpsDuringFault, 100*float64(f.OpsDuringFault)/float64(f.FaultFreeOps), f.FaultFreeOps, *share*100)
		}
		r.res.Checks = append(r.res.Checks, c)
	}
	if wa.MinOperations > 0 {
		c := report.Check{Kind: "workload", Name: "operations checked", Value: fmt.Sprint(f.Operations), Budget: fmt.Sprintf("≥ %d", wa.MinOperations)}
		if f.Operations < wa.MinOperations {
			c.Violation = fmt.Sprintf("only %d operations checked (at least %d needed)", f.Operations, wa.MinOperations)
		}
		r.res.Checks = append(r.res.Checks, c)
	}
	return nil
}

// metricCheck judges one metric: its rise over the run, or its value
// after the heal (polled for up to a minute, as a queue drains).
func (r *run) metricCheck(ctx context.Context, ma scenario.MetricAssertion, before operatorState, after *operatorState) (report.Check, error) {
	name := metricSelector(ma.Name, ma.Labels)
	if ma.MaxIncrease != nil {
		b, a := framework.SumSamples(before.families, ma.Name, ma.Labels), framework.SumSamples(after.families, ma.Name, ma.Labels)
		rise := a - b
		if restarts(before, *after) > 0 {
			rise = a // counters restart with the process: count what the new one saw
		}
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
	err := framework.PollFor(ctx, fmt.Sprintf("%s to be %v", name, want), time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		fams, err := r.scrapeOperator(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		after.families = fams
		got = framework.SumSamples(fams, ma.Name, ma.Labels)
		return got == want, fmt.Sprintf("%v", got), nil
	})
	c := report.Check{Kind: "operator", Name: name + " after the heal", Value: fmt.Sprint(got), Budget: fmt.Sprint(want)}
	if err != nil {
		c.Violation = fmt.Sprintf("%s is %v after the heal (want %v)", name, got, want)
	}
	if ma.Name == "workqueue_depth" {
		r.res.Figures.WorkqueueDepth = got
	}
	return c, nil
}

// ownedVersions maps the objects the resource controls, of the kinds an
// operator usually owns, to their resourceVersions.
func (r *run) ownedVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"StatefulSet": &appsv1.StatefulSetList{}, "Deployment": &appsv1.DeploymentList{}, "Service": &corev1.ServiceList{},
		"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}, "PodDisruptionBudget": &policyv1.PodDisruptionBudgetList{},
	}
	for kind, l := range lists {
		if err := r.e.Client.List(ctx, l, client.InNamespace(r.ns)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			o := it.(client.Object)
			if ref := metav1.GetControllerOf(o); ref != nil && ref.UID == r.obj.GetUID() {
				out[kind+"/"+o.GetName()] = o.GetResourceVersion()
			}
		}
	}
	return out, nil
}

// unstable returns the owned objects whose resourceVersion changed over d.
func (r *run) unstable(ctx context.Context, d time.Duration) ([]string, error) {
	before, err := r.ownedVersions(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	after, err := r.ownedVersions(ctx)
	if err != nil {
		return nil, err
	}
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, fmt.Sprintf("%s (resourceVersion %s -> %s)", k, before[k], v))
		}
	}
	slices.Sort(changed)
	return changed, nil
}

// exec runs the workload command in the first pod of its role.
// commandResult is how the workload command ended: where it ran, the
// last line it printed, and its error (a non-zero exit included).
type commandResult struct {
	pod, last string
	err       error
}

func (c commandResult) check() report.Check {
	ch := report.Check{Kind: "workload", Name: "workload command in " + c.pod, Value: "exit 0", Budget: "exit 0"}
	if c.last != "" {
		ch.Value += ": " + c.last
	}
	if c.err != nil {
		ch.Value = c.err.Error()
		ch.Violation = "the workload command failed: " + c.err.Error()
	}
	return ch
}

// startCommand runs the workload command, from the moment the fault is
// injected, in the first pod of its role as the fault's resolution sees it;
// its result arrives on r.command.
func (r *run) startCommand(ctx context.Context, c *scenario.Command) {
	res := r.faultRoles
	if res == nil {
		res = r.roles.snapshot()
	}
	pods, err := res.pods(ctx, c.Role)
	if err == nil && len(pods.Names) == 0 {
		err = fmt.Errorf("role %q has no pod to run the workload command in", c.Role)
	}
	if err != nil {
		r.command <- commandResult{err: err}
		return
	}
	pod := pods.Namespace + "/" + pods.Names[0]
	r.e.logf("%s: workload command %q in %s", r.s.Metadata.Name, firstLine(strings.Join(c.Command, " "), 60), pod)
	go func() {
		out, err := framework.Exec(ctx, r.e.Config, pods.Namespace, pods.Names[0], c.Container, c.Command...)
		r.command <- commandResult{pod: pod, last: lastLine(out.Stdout, 120), err: err}
	}()
}

// lastLine is the last non-blank line of s, cut to at most n bytes (n <= 0: not cut).
func lastLine(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return cut(strings.TrimSpace(lines[len(lines)-1]), n)
}

// firstLine is the first line of s, cut to at most n bytes.
func firstLine(s string, n int) string {
	first, rest, _ := strings.Cut(s, "\n")
	if rest != "" {
		first += " …"
	}
	return cut(first, n)
}

func cut(s string, n int) string {
	if n > 0 && len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// metricSelector writes a metric and its labels the way PromQL does:
// name{a="x",b="y"}, labels sorted.
func metricSelector(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return name + "{" + strings.Join(pairs, ",") + "}"
}
