package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// ActionKind is what one step of a schedule does.
type ActionKind int

// Action kinds.
const (
	// Reconcile pops the next queued request and reconciles it.
	Reconcile ActionKind = iota
	// WorldStep runs the target's world steps (simulated controllers, kubelets).
	WorldStep
	// Perturb applies one of the target's perturbations.
	Perturb
	// Resync enqueues every root object, as a periodic resync does.
	Resync
)

func (k ActionKind) String() string {
	return [...]string{"reconcile", "world", "perturb", "resync"}[k]
}

// FaultKind is the kind of fault an action carries.
type FaultKind int

// Fault kinds.
const (
	NoFault FaultKind = iota
	// Crash aborts the reconcile after its k-th write; the next reconcile
	// runs on a fresh reconciler (in-memory state lost, API state kept).
	Crash
	// Stale serves the reconcile's reads from the world as it was a few
	// steps ago, like an informer cache that is behind.
	Stale
	// APIError fails one call of the reconcile with an API error.
	APIError
	// DropEvent loses the next queued trigger.
	DropEvent
)

func (k FaultKind) String() string {
	return [...]string{"none", "crash", "stale", "api-error", "drop-event"}[k]
}

// APIErrorKind is which API error an APIError fault returns.
type APIErrorKind int

// API errors a fault can return.
const (
	Conflict APIErrorKind = iota
	Timeout
	Internal
	TooManyRequests
)

func (k APIErrorKind) String() string {
	return [...]string{"409-conflict", "504-timeout", "500-internal", "429-too-many-requests"}[k]
}

// Fault is a fault carried by an action: data, which schedules generate
// and Shrink drops. Run executes Crash and APIError faults through
// framework.Faults (see clientFault), Stale faults by serving the
// reconcile's reads from an older view, and DropEvent in its queue.
type Fault struct {
	Kind FaultKind
	// CrashAfter: the reconcile is aborted after this many writes (Crash).
	CrashAfter int
	// Lag: reads see the world as of this many steps ago (Stale).
	Lag int
	// Verb and Nth: the Nth call (1-based) with this verb fails (APIError).
	Verb string
	Nth  int
	Err  APIErrorKind
}

func (f Fault) String() string {
	switch f.Kind {
	case Crash:
		return fmt.Sprintf("crash after %d write(s)", f.CrashAfter)
	case Stale:
		return fmt.Sprintf("stale reads lagging %d step(s)", f.Lag)
	case APIError:
		return fmt.Sprintf("%s on %s #%d", f.Err, f.Verb, f.Nth)
	case DropEvent:
		return "drop the next queued event"
	default:
		return "no fault"
	}
}

// Action is one step of a schedule.
type Action struct {
	Kind ActionKind
	// Perturbation indexes the target's perturbations (Perturb).
	Perturbation int
	// Choice is a random number the perturbation may use (which member,
	// which image), fixed by the seed so that replays make the same choice.
	Choice uint64
	// Fault, if any.
	Fault Fault
}

// Schedule is a run's plan, a pure function of Seed and the Config.
type Schedule struct {
	Seed    uint64
	Actions []Action
}

// Config shapes generated schedules.
type Config struct {
	// Steps is the number of actions before the faults stop (40 by default).
	Steps int
	// FaultRate is the chance that an action carries a fault (0.3 by default).
	FaultRate float64
	// Perturbations is how many perturbations the target offers; the
	// schedule picks among them.
	Perturbations int
	// PerturbRate is the chance that an action is a perturbation (0.12 by default).
	PerturbRate float64
	// FaultVariants is how many consecutive seeds share one input script
	// (the actions, perturbations and their choices) and differ only in
	// their faults, as Sieve perturbs one workload many ways: the script of
	// seed s is numbered s/FaultVariants. 4 by default; 1 gives every seed
	// its own script.
	FaultVariants int
}

func (c Config) withDefaults() Config {
	if c.Steps == 0 {
		c.Steps = 40
	}
	if c.FaultRate == 0 {
		c.FaultRate = 0.3
	}
	if c.PerturbRate == 0 {
		c.PerturbRate = 0.12
	}
	if c.FaultVariants == 0 {
		c.FaultVariants = 4
	}
	return c
}

var verbs = []string{"get", "list", "create", "update", "patch", "apply", "delete", "patch/status", "update/status"}

// Generate builds the schedule of a seed. The same seed and config always
// give the same schedule. The inputs come from the seed's script and the
// faults from the seed itself, so seeds of one script differ only in faults.
func Generate(seed uint64, cfg Config) Schedule {
	cfg = cfg.withDefaults()
	script := rand.New(rand.NewPCG(seed/uint64(cfg.FaultVariants), 0x9a7e1e7))
	faults := rand.New(rand.NewPCG(seed, 0xfa1175))
	s := Schedule{Seed: seed}
	for range cfg.Steps {
		a := Action{Choice: script.Uint64()}
		switch r := script.Float64(); {
		case cfg.Perturbations > 0 && r < cfg.PerturbRate:
			a.Kind, a.Perturbation = Perturb, script.IntN(cfg.Perturbations)
		case r < cfg.PerturbRate+0.30:
			a.Kind = WorldStep
		case r < cfg.PerturbRate+0.33:
			a.Kind = Resync
		default:
			a.Kind = Reconcile
		}
		if faults.Float64() < cfg.FaultRate {
			a.Fault = randomFault(faults, a.Kind)
		}
		s.Actions = append(s.Actions, a)
	}
	return s
}

func randomFault(rng *rand.Rand, kind ActionKind) Fault {
	if kind != Reconcile {
		return Fault{Kind: DropEvent}
	}
	switch rng.IntN(3) {
	case 0:
		return Fault{Kind: Crash, CrashAfter: rng.IntN(4)}
	case 1:
		return Fault{Kind: Stale, Lag: 1 + rng.IntN(4)}
	default:
		return Fault{Kind: APIError, Verb: verbs[rng.IntN(len(verbs))], Nth: 1 + rng.IntN(2), Err: APIErrorKind(rng.IntN(4))}
	}
}

// Faults lists the indexes of actions that carry a fault.
func (s Schedule) Faults() []int {
	var out []int
	for i, a := range s.Actions {
		if a.Fault.Kind != NoFault {
			out = append(out, i)
		}
	}
	return out
}

// Keep returns a copy of the schedule with only the listed faults; the
// actions themselves (and so the inputs) stay the same.
func (s Schedule) Keep(faults []int) Schedule {
	keep := map[int]bool{}
	for _, i := range faults {
		keep[i] = true
	}
	out := Schedule{Seed: s.Seed, Actions: append([]Action(nil), s.Actions...)}
	for i := range out.Actions {
		if !keep[i] {
			out.Actions[i].Fault = Fault{}
		}
	}
	return out
}

// WithoutFaults is the schedule's inputs alone: the differential baseline.
func (s Schedule) WithoutFaults() Schedule { return s.Keep(nil) }

// Describe renders the schedule one action per line, with perturbation names.
func (s Schedule) Describe(perturbations []string) string {
	var b strings.Builder
	for i, a := range s.Actions {
		fmt.Fprintf(&b, "  %2d %s", i, a.Kind)
		if a.Kind == Perturb && a.Perturbation < len(perturbations) {
			fmt.Fprintf(&b, " %s", perturbations[a.Perturbation])
		}
		if a.Fault.Kind != NoFault {
			fmt.Fprintf(&b, " [%s]", a.Fault)
		}
		b.WriteString("\n")
	}
	return b.String()
}
