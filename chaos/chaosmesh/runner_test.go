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
// Its During runs until release is closed.
func harnessTrial(hold time.Duration, still func(time.Time) bool, release <-chan struct{}, injected, healed *atomic.Int64) Trial {
	return Trial{
		Name: "t",
		Hold: hold,
		Fault: func(context.Context, *rand.Rand) (*Experiment, error) {
			return &Experiment{Harness: &HarnessFault{Name: "t", Kind: "test",
				Inject:  func(context.Context) error { injected.Store(time.Now().UnixNano()); return nil },
				Recover: func(context.Context) error { healed.Store(time.Now().UnixNano()); return nil },
			}}, nil
		},
		During:    func(context.Context) error { <-release; return nil },
		Still:     still,
		Converged: func(context.Context) error { return nil },
	}
}

// A hold ends early once Still says so, never asked before During has
// ended, and is whole when Still never says so or is not set.
func TestHoldEndsWhenStill(t *testing.T) {
	g := NewWithT(t)
	r := &Runner{Unavailable: "no cluster", Log: io.Discard}
	const hold = 2 * time.Second

	// Still at once: not asked while During runs, then the hold ends at
	// the first poll after During.
	var injected, healed, asked, since atomic.Int64
	release := make(chan struct{})
	still := func(s time.Time) bool { asked.Add(1); since.Store(s.UnixNano()); return true }
	done := make(chan struct{})
	var errs []string
	go func() {
		defer close(done)
		errs = r.Run(t.Context(), harnessTrial(hold, still, release, &injected, &healed), 1).Errors
	}()
	g.Eventually(injected.Load).ShouldNot(BeZero(), "the fault is injected")
	g.Consistently(asked.Load).WithTimeout(4*stillPoll).Should(BeZero(), "Still is not asked while During runs")
	g.Expect(healed.Load()).To(BeZero(), "the fault holds while During runs")
	close(release)
	g.Eventually(done).WithTimeout(hold).Should(BeClosed(), "healed before the whole hold once still")
	g.Expect(errs).To(BeEmpty())
	g.Expect(time.Duration(healed.Load()-injected.Load())).To(BeNumerically("<", hold), "ended early")
	g.Expect(since.Load()).To(BeNumerically(">", injected.Load()), "Still is told when During ended")

	whole := func(still func(time.Time) bool) time.Duration {
		var injected, healed atomic.Int64
		release := make(chan struct{})
		close(release)
		run := r.Run(t.Context(), harnessTrial(hold, still, release, &injected, &healed), 1)
		g.Expect(run.Errors).To(BeEmpty())
		return time.Duration(healed.Load() - injected.Load())
	}
	g.Expect(whole(func(time.Time) bool { return false })).To(BeNumerically(">=", hold), "never still: the whole hold")
	g.Expect(whole(nil)).To(BeNumerically(">=", hold), "no Still: the whole hold")
}
