package sim

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Flags of test binaries that use Check, for replaying a failure.
var (
	flagSeed  = flag.Uint64("sim.seed", 0, "replay this seed only (0 explores)")
	flagKeep  = flag.String("sim.keep", "", "with -sim.seed: keep only these fault indexes (comma-separated, or none), as a shrunk failure prints")
	flagSeeds = flag.Int("sim.seeds", 0, "how many seeds to explore (0 uses the test's default)")
	flagFirst = flag.Uint64("sim.first", 1, "the first seed explored")
)

// CheckOptions configure Check.
type CheckOptions struct {
	Options
	// Seeds explored by default.
	Seeds int
	// Package is the test's package path, for the replay command.
	Package string
}

// Explore runs seeds first, first+1, ... (n of them), each with the
// differential oracle, on every core, and returns the failure of the lowest
// failing seed (unshrunk) and how many schedules ran.
func Explore(ctx context.Context, t Target, first uint64, n int, o Options) (*Result, int, error) {
	cfg := o.Config
	cfg.Perturbations = perturbationCount(ctx, t)
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	ran := 0
	for start := 0; start < n; start += workers {
		batch := min(workers, n-start)
		results := make([]*Result, batch)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			wg.Go(func() {
				seed := first + uint64(start+i)
				results[i], errs[i] = RunDifferential(ctx, t, Generate(seed, cfg), o)
				if errs[i] != nil {
					errs[i] = fmt.Errorf("seed %d: %w", seed, errs[i])
				}
			})
		}
		wg.Wait()
		ran += batch
		for i := range batch {
			if errs[i] != nil {
				return nil, ran, errs[i]
			}
			if results[i].Violation != nil {
				return results[i], ran, nil
			}
		}
	}
	return nil, ran, nil
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

// Check explores seeds (or replays -sim.seed), and on a failure shrinks it
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
	failure, ran, err := Explore(ctx, t, *flagFirst, n, o.Options)
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
