package chaosmesh

import (
	"context"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// harnessTrial is a trial of a harness fault that records when it was
// injected and recovered, held for hold, with still as its Trial.Still.
func harnessTrial(hold time.Duration, still func(time.Time) bool, injected, healed *atomic.Int64) Trial {
	return Trial{
		Name: "t",
		Hold: hold,
		Fault: func(context.Context, *rand.Rand) (*Experiment, error) {
			return &Experiment{Harness: &HarnessFault{Name: "t", Kind: "test",
				Inject:  func(context.Context) error { injected.Store(time.Now().UnixNano()); return nil },
				Recover: func(context.Context) error { healed.Store(time.Now().UnixNano()); return nil },
			}}, nil
		},
		During:    func(context.Context) error { time.Sleep(100 * time.Millisecond); return nil },
		Still:     still,
		Converged: func(context.Context) error { return nil },
	}
}

// A hold ends early once Still says so, never before During has ended,
// and is whole when Still never does or is not set.
func TestHoldEndsWhenStill(t *testing.T) {
	g := NewWithT(t)
	r := &Runner{Unavailable: "no cluster", Log: io.Discard}
	held := func(still func(time.Time) bool) (time.Duration, time.Time) {
		var injected, healed atomic.Int64
		var since atomic.Int64
		wrapped := still
		if still != nil {
			wrapped = func(s time.Time) bool { since.Store(s.UnixNano()); return still(s) }
		}
		run := r.Run(t.Context(), harnessTrial(2*time.Second, wrapped, &injected, &healed), 1)
		g.Expect(run.Errors).To(BeEmpty())
		return time.Duration(healed.Load() - injected.Load()), time.Unix(0, since.Load())
	}

	d, since := held(func(time.Time) bool { return true })
	g.Expect(d).To(BeNumerically("<", time.Second), "still at once: healed after During and one poll")
	g.Expect(d).To(BeNumerically(">=", 100*time.Millisecond), "not before During ended")
	g.Expect(since).NotTo(BeZero(), "Still is told when During ended")

	d, _ = held(func(time.Time) bool { return false })
	g.Expect(d).To(BeNumerically(">=", 2*time.Second), "never still: the whole hold")

	d, _ = held(nil)
	g.Expect(d).To(BeNumerically(">=", 2*time.Second), "no Still: the whole hold")
}
