package sim

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Flags of test binaries that use Check, for replaying a failure.
var (
	flagSeed  = flag.Uint64("sim.seed", 0, "replay this seed only (0 runs -sim.seeds of them)")
	flagKeep  = flag.String("sim.keep", "", "with -sim.seed: keep only these fault indexes (comma-separated, or none), as a shrunk failure prints")
	flagSeeds = flag.Int("sim.seeds", 0, "how many seeds to run (0 uses the test's default)")
	flagFirst = flag.Uint64("sim.first", 1, "the first seed run")
)

// CheckOptions configure Check.
type CheckOptions struct {
	Options
	// Seeds run by default.
	Seeds int
	// Package is the test's package path, for the replay command.
	Package string
}

// RunSeeds runs seeds first, first+1, ... (n of them), each with the
// differential oracle, on every core, and returns the failure of the lowest
// failing seed (unshrunk) and how many schedules it took to find it (n when
// none failed). Seeds sharing an input script share one fault-free run.
func RunSeeds(ctx context.Context, t Target, first uint64, n int, o Options) (*Result, int, error) {
	cfg := o.Config
	cfg.Perturbations = perturbationCount(ctx, t)
	base := newBaselines()
	var (
		next    atomic.Int64 // index of the next seed to hand out
		mu      sync.Mutex
		lowest  = n // index of the lowest failing (or erroring) seed so far
		failure *Result
		failErr error
	)
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				mu.Lock()
				stop := i >= lowest
				mu.Unlock()
				if stop || ctx.Err() != nil {
					return
				}
				seed := first + uint64(i)
				res, err := runDifferential(ctx, t, Generate(seed, cfg), o, base)
				if res != nil {
					o.Tally.add(res.Notes)
				}
				if err == nil && res.Violation == nil {
					continue
				}
				mu.Lock()
				if i < lowest {
					lowest, failure, failErr = i, res, nil
					if err != nil {
						failure, failErr = nil, fmt.Errorf("seed %d: %w", seed, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if lowest == n {
		return nil, n, ctx.Err()
	}
	return failure, lowest + 1, failErr
}

var perturbationCounts sync.Map // target name -> int

// perturbationCount asks a throwaway setup, once per target, how many
// perturbations it offers (the schedule picks among them by index).
func perturbationCount(ctx context.Context, t Target) int {
	if n, ok := perturbationCounts.Load(t.Name); ok {
		return n.(int)
	}
	res, err := Run(ctx, t, Schedule{}, Options{SettlePasses: 1})
	if err != nil || res == nil {
		return 0
	}
	perturbationCounts.Store(t.Name, len(res.Perturbations))
	return len(res.Perturbations)
}

// Check runs seeds (or replays -sim.seed), and on a failure shrinks it
// and fails the test with the seed, the minimal faults, the trace and a
// one-line replay command. It returns the number of schedules run.
func Check(tb testing.TB, t Target, o CheckOptions) int {
	tb.Helper()
	ctx := tb.Context()
	cfg := o.Config
	cfg.Perturbations = perturbationCount(ctx, t)
	o.Config = cfg

	if *flagSeed != 0 {
		s := Generate(*flagSeed, cfg)
		if *flagKeep != "" {
			s = s.Keep(parseKeep(tb, *flagKeep))
		}
		res, err := RunDifferential(ctx, t, s, o.Options)
		if err != nil {
			tb.Fatal(err)
		}
		o.Tally.add(res.Notes)
		if res.Violation != nil {
			tb.Fatalf("%s", FormatFailure(res, replayCommand(tb, o.Package, res)))
		}
		tb.Logf("%s: seed %d passed:\n%s", t.Name, *flagSeed, strings.Join(res.Trace, "\n"))
		return 1
	}
	n := o.Seeds
	if *flagSeeds > 0 {
		n = *flagSeeds
	}
	failure, ran, err := RunSeeds(ctx, t, *flagFirst, n, o.Options)
	if err != nil {
		tb.Fatal(err)
	}
	if failure == nil {
		return ran
	}
	shrunk, err := Shrink(ctx, t, failure, o.Options)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Fatalf("%s failed after %d schedule(s); %d fault(s) shrunk to %d:\n%s", t.Name, ran,
		len(failure.Schedule.Faults()), len(shrunk.Schedule.Faults()), FormatFailure(shrunk, replayCommand(tb, o.Package, shrunk)))
	return ran
}

func parseKeep(tb testing.TB, s string) []int {
	out := []int{}
	if s == "none" {
		return out
	}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			tb.Fatalf("-sim.keep: %q is not a fault index", f)
		}
		out = append(out, n)
	}
	return out
}

func replayCommand(tb testing.TB, pkg string, res *Result) string {
	keep := make([]string, 0)
	for _, i := range res.Schedule.Faults() {
		keep = append(keep, strconv.Itoa(i))
	}
	k := strings.Join(keep, ",")
	if k == "" {
		k = "none"
	}
	return fmt.Sprintf("go test %s -run '^%s$' -count=1 -args -sim.seed=%d -sim.keep=%s",
		pkg, tb.Name(), res.Schedule.Seed, k)
}
