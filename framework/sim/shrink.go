package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

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
