package report

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Budget is what a scenario may cost. Zero durations mean "not judged".
type Budget struct {
	// DegradedWithin: the Degraded condition must turn True within this
	// long of the injection (the operator noticed the fault).
	DegradedWithin metav1.Duration `json:"degradedWithin,omitempty"`
	// AvailableWithin: Available must be True within this long of the heal.
	AvailableWithin metav1.Duration `json:"availableWithin,omitempty"`
	// WritesResumeWithin: writes must be acknowledged again within this
	// long of the fault's request (the end of the longest stretch without
	// an acknowledged write, up to convergence).
	WritesResumeWithin metav1.Duration `json:"writesResumeWithin,omitempty"`
	// AvailableNeverFalse: Available stays True from injection to heal (a
	// minority fault must not cost quorum).
	AvailableNeverFalse bool `json:"availableNeverFalse,omitempty"`
	// ReconcileErrors is the largest allowed increase of the controller's
	// reconcile error count over the run.
	ReconcileErrors int `json:"reconcileErrors"`
	// OperatorRestarts is how many times the operator may restart or be
	// replaced (non-zero only where the scenario kills it).
	OperatorRestarts int `json:"operatorRestarts"`
	// MinOperations is the least number of workload operations that must
	// be checked (a run that wrote nothing proves nothing).
	MinOperations int `json:"minOperations,omitempty"`
}

// Figures are what a scenario measured. Durations are -1 when the event
// never happened.
type Figures struct {
	TimeToDegraded    time.Duration `json:"timeToDegraded"`    // from injection (every target reported injected)
	TimeToAvailable   time.Duration `json:"timeToAvailable"`   // from heal
	WritesResumeAfter time.Duration `json:"writesResumeAfter"` // end of the longest write stall, from the chaos object's creation; 0 when writes never stalled
	LongestWriteGap   time.Duration `json:"longestWriteGap"`
	AvailableFalse    bool          `json:"availableFalseDuringFault"`
	// DegradedClears is from the moment every targeted pod was ready again
	// after the heal to Degraded=False (-1: not measured, as the pods or
	// the condition never got there).
	DegradedClears time.Duration `json:"degradedClears,omitempty"`
	Operations     int           `json:"operationsChecked"`
	// OpsDuringFault are the operations acknowledged from injection to
	// heal; FaultFreeOps what the workload's rate before the fault
	// request gives over the same length (0: no baseline).
	OpsDuringFault   int      `json:"opsDuringFault,omitempty"`
	FaultFreeOps     int      `json:"faultFreeOps,omitempty"`
	AckedWrites      int      `json:"ackedWrites"`
	AmbiguousWrites  int      `json:"ambiguousWrites"`
	WritesLost       int      `json:"writesLost"`
	Linearizable     string   `json:"linearizable"` // porcupine: Ok, Illegal, Unknown
	PanicsDelta      float64  `json:"reconcilePanicsDelta"`
	ErrorsDelta      float64  `json:"reconcileErrorsDelta"`
	WorkqueueDepth   float64  `json:"workqueueDepthAfter"`
	OperatorRestarts int      `json:"operatorRestarts"`
	UnstableObjects  []string `json:"unstableObjects,omitempty"`
}

// Check is one judged figure: what was measured, what the budget allows,
// and, when it is over, the violation in words.
type Check struct {
	// Kind groups checks: condition, workload, operator (empty for the
	// figure-and-budget checks of Checks).
	Kind   string `json:"kind,omitempty"`
	Name   string `json:"name"`
	Value  string `json:"value"`
	Budget string `json:"budget"` // "not judged" when the budget leaves it open
	// Violation is empty when the figure is within its budget.
	Violation string `json:"violation,omitempty"`
	// Where is the place a violated check names, when it names one: the
	// function an operator panicked in ("panic in pkg.Func"). Findings
	// in different places are different causes.
	Where string `json:"where,omitempty"`
}

// OK tells whether the figure is within its budget.
func (c Check) OK() bool { return c.Violation == "" }

// notJudged is a check's budget when the budget leaves it open.
const notJudged = "not judged"

// Checks compares every figure with its budget, in the report's order.
func Checks(f Figures, b Budget) []Check {
	var out []Check
	within := func(kind, name, what string, d time.Duration, limit metav1.Duration) {
		c := Check{Kind: kind, Name: name, Value: FormatDuration(d), Budget: notJudged}
		if limit.Duration != 0 {
			c.Budget = "≤ " + limit.Duration.String()
		}
		switch {
		case limit.Duration == 0:
		case d < 0:
			c.Violation = fmt.Sprintf("%s: never happened (budget %s)", what, limit.Duration)
		case d > limit.Duration:
			c.Violation = fmt.Sprintf("%s: %s, over the budget of %s", what, d.Round(100*time.Millisecond), limit.Duration)
		}
		out = append(out, c)
	}
	within("condition", "Degraded=True after the fault", "time to Degraded=True after the injection", f.TimeToDegraded, b.DegradedWithin)
	within("condition", "Available=True after the heal", "time to Available=True after the heal", f.TimeToAvailable, b.AvailableWithin)
	within("workload", "writes resume after the fault", "time until writes resumed after the fault", f.WritesResumeAfter, b.WritesResumeWithin)

	never := Check{Kind: "condition", Name: "Available never False during the fault", Value: yesNo(!f.AvailableFalse), Budget: notJudged}
	if b.AvailableNeverFalse {
		never.Budget = "yes"
		if f.AvailableFalse {
			never.Violation = "Available turned False during a fault that leaves quorum intact"
		}
	}
	out = append(out, never)

	c := Check{Name: "acknowledged writes lost", Value: fmt.Sprint(f.WritesLost), Budget: "0"}
	if f.WritesLost > 0 {
		c.Violation = fmt.Sprintf("%d acknowledged writes lost", f.WritesLost)
	}
	out = append(out, c)
	c = Check{Name: "history linearizable", Value: f.Linearizable, Budget: "Ok"}
	if f.Linearizable != "Ok" {
		c.Violation = fmt.Sprintf("history not proven linearizable: %s", f.Linearizable)
	}
	out = append(out, c)
	c = Check{Name: "operations checked", Value: fmt.Sprint(f.Operations), Budget: fmt.Sprintf("≥ %d", b.MinOperations)}
	if f.Operations < b.MinOperations {
		c.Violation = fmt.Sprintf("only %d operations checked (at least %d needed)", f.Operations, b.MinOperations)
	}
	out = append(out, c)
	c = Check{Name: "reconcile panics", Value: fmt.Sprintf("+%v", f.PanicsDelta), Budget: "0"}
	if f.PanicsDelta != 0 {
		c.Violation = fmt.Sprintf("controller_runtime_reconcile_panics_total rose by %v", f.PanicsDelta)
	}
	out = append(out, c)
	c = Check{Name: "reconcile errors", Value: fmt.Sprintf("+%v", f.ErrorsDelta), Budget: fmt.Sprintf("≤ %d", b.ReconcileErrors)}
	if f.ErrorsDelta > float64(b.ReconcileErrors) {
		c.Violation = fmt.Sprintf("reconcile errors rose by %v (budget %d)", f.ErrorsDelta, b.ReconcileErrors)
	}
	out = append(out, c)
	c = Check{Name: "workqueue depth after the heal", Value: fmt.Sprint(f.WorkqueueDepth), Budget: "0"}
	if f.WorkqueueDepth != 0 {
		c.Violation = fmt.Sprintf("workqueue depth %v after the heal (want 0)", f.WorkqueueDepth)
	}
	out = append(out, c)
	c = Check{Name: "operator restarts", Value: fmt.Sprint(f.OperatorRestarts), Budget: fmt.Sprintf("≤ %d", b.OperatorRestarts)}
	if f.OperatorRestarts > b.OperatorRestarts {
		c.Violation = fmt.Sprintf("operator restarted %d times (budget %d)", f.OperatorRestarts, b.OperatorRestarts)
	}
	out = append(out, c)
	for _, u := range f.UnstableObjects {
		out = append(out, Check{Name: "owned objects stable once converged", Value: u, Budget: "unchanged for 10s",
			Violation: "owned object still changing after convergence: " + u})
	}
	if len(f.UnstableObjects) == 0 {
		out = append(out, Check{Name: "owned objects stable once converged", Value: "unchanged", Budget: "unchanged for 10s"})
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Violations are the violated checks' messages.
func Violations(checks []Check) []string {
	var v []string
	for _, c := range checks {
		if !c.OK() {
			v = append(v, c.Violation)
		}
	}
	return v
}
