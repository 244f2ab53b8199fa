package report

import (
	"fmt"
	"time"
)

// Phase timestamps of one run.
type Phases struct {
	Start     time.Time `json:"start"`
	Requested time.Time `json:"requested"` // the chaos object was created
	Injected  time.Time `json:"injected"`  // Chaos Mesh reported every target injected
	Healed    time.Time `json:"healed"`    // every target reported recovered, the object gone
	Converged time.Time `json:"converged"` // Converged returned
}

// Run is the outcome of running one scenario.
type Run struct {
	Scenario   string        `json:"scenario"`
	Seed       uint64        `json:"seed"`
	Experiment string        `json:"experiment,omitempty"` // kind/action
	Targets    []string      `json:"targets,omitempty"`
	Phases     Phases        `json:"phases"`
	InjectTook time.Duration `json:"injectTook"`
	HealTook   time.Duration `json:"healTook"`
	// Skipped holds the reason a scenario did not run (the kernel lacks
	// what the fault needs); a skipped run never passes.
	Skipped string `json:"skipped,omitempty"`
	// Leftovers are traces Chaos Mesh leaves by design (unreferenced
	// chains and ipsets), reported, not failed.
	Leftovers []string `json:"leftovers,omitempty"`
	// Errors are the violations found by the runner itself.
	Errors []string `json:"errors,omitempty"`
	// NoRoom is the scheduler's message when the resource's pods did not
	// fit on the cluster's nodes at the start: work beside the run may
	// have held what they ask for, so the run says nothing of the
	// operator.
	NoRoom string `json:"noRoom,omitempty"`
	// Unpullable is the first image the resource's pods could not get
	// ("<image>: <reason>: <message>") when that ended a wait: what the
	// spec asked for does not exist, or not on this cluster.
	Unpullable string `json:"unpullable,omitempty"`
}

// Failed tells whether the runner found a violation.
func (r *Run) Failed() bool { return len(r.Errors) > 0 }

// Failf records a violation found by the runner.
func (r *Run) Failf(format string, args ...any) {
	r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
}
