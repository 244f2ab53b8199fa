package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/timeline"
	"github.com/gauntlet-dev/gauntlet/chaos/workload"
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

// judge turns every assertion into a check.
func (r *run) judge(ctx context.Context, tl *timeline.Timeline, ledger *workload.Ledger, before operatorState) error {
	a := r.s.Spec.Assertions
	ph := r.res.Phases
	from := map[string]time.Time{scenario.FromRequested: ph.Requested, scenario.FromInjected: ph.Injected, scenario.FromHealed: ph.Healed}
	recovered, back := recoveredAt(r.res.Series.Pods, r.targets, ph.Healed)
	if back {
		from[scenario.FromRecovered] = recovered
	}
	r.conditionFigures(tl, recovered, back)
	for _, ca := range a.Conditions {
		c, err := r.conditionCheck(tl, ca, from)
		if err != nil {
			return err
		}
		r.res.Checks = append(r.res.Checks, c)
	}

	if len(a.Follows) > 0 {
		r.followsAt(ctx, "the end")
		r.res.Checks = append(r.res.Checks, r.followChecks()...)
	}
	if a.TruthfulStatus {
		r.statusAt(ctx, "the end")
		r.res.Checks = append(r.res.Checks, r.truthfulCheck())
	}
	if a.ChangesShow && !r.twin {
		c, err := r.effectCheck(ctx)
		if err != nil {
			return err
		}
		r.res.Checks = append(r.res.Checks, c)
	}
	if r.budget != nil {
		r.res.Checks = append(r.res.Checks, r.budget.Check())
	}
	// The data is read back while the operator is watched for stillness:
	// neither writes what the other reads. The data's checks come first in
	// the report, as they are listed.
	type dataChecks struct {
		checks []report.Check
		err    error
	}
	data := make(chan dataChecks, 1)
	if ledger != nil {
		go func() {
			t0 := time.Now()
			checks, err := r.workloadChecks(ctx, ledger)
			r.e.logf("%s: the data checked in %s (%d operations)", r.s.Metadata.Name, time.Since(t0).Round(time.Millisecond), len(ledger.Ops))
			data <- dataChecks{checks, err}
		}()
	} else {
		data <- dataChecks{}
	}
	t0 := time.Now()
	n := len(r.res.Checks)
	err := r.operatorChecks(ctx, before)
	r.e.logf("%s: the operator checked in %s", r.s.Metadata.Name, time.Since(t0).Round(time.Millisecond))
	d := <-data
	r.res.Checks = slices.Insert(r.res.Checks, n, d.checks...)
	return errors.Join(d.err, err)
}

// conditionFigures records the conventional conditions' figures, for the
// summary, whether or not the file asserts them: -1 for one not reached.
// recovered is when the fault's targets were back, if back.
func (r *run) conditionFigures(tl *timeline.Timeline, recovered time.Time, back bool) {
	ph := r.res.Phases
	f := &r.res.Figures
	f.TimeToDegraded, f.TimeToAvailable, f.DegradedClears = -1, -1, -1
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
}

// conditionCheck judges one condition assertion from the timeline.
func (r *run) conditionCheck(tl *timeline.Timeline, ca scenario.ConditionAssertion, from map[string]time.Time) (report.Check, error) {
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
func firstCEL(tl *timeline.Timeline, p program, want bool, from time.Time) (time.Time, bool) {
	objs := tl.Objects()
	var inForce *timeline.ObjectSample
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
func everCEL(tl *timeline.Timeline, p program, want bool, from, to time.Time) bool {
	at, ok := firstCEL(tl, p, want, from)
	return ok && !at.After(to)
}

// recoveredAt is when, after healed, every pod of targets was ready for
// good (a pod replaced under the same name counts once its replacement
// is), read from the observer's pod events: a pod that was ready at the
// heal and stayed so counts from the heal.
func recoveredAt(events []report.PodEvent, targets []chaosmesh.Pods, healed time.Time) (time.Time, bool) {
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
