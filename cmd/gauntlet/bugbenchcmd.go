package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/cmd/gauntlet/bugbench"
	"github.com/gauntlet-dev/gauntlet/framework"
)

type benchBugsFlags struct {
	file, out, expect, rejudge string
	ids, repos                 []string
	o                          bugbench.Options
	keepSources, onlyExpected  bool
	j                          benchJobFlags
}

func newBenchBugsCmd() *cobra.Command {
	f := &benchBugsFlags{}
	cmd := &cobra.Command{
		Use:   "bugs",
		Short: "Find published operator bugs again: a campaign per buggy commit, each finding replayed on the fix",
		Long: `bugs reads a bug benchmark (suites/bugbench/bugs.yaml: Sieve's and Acto's
published bugs; suites/bugbench/reference.yaml: the reference operator's
variants) and, for each buggy source (bugs at the same commit share one),
makes the source tree from the operator's git repository, runs
'gauntlet explore' on it from the operator's one base scenario with nothing
written per bug, and replays every finding's scenario file on the buggy
source and on each bug's fix. A bug is found when a finding fails on its
buggy source and passes on its fix; a finding that fails on every fix of a
campaign whose bugs all have one (and none of whose source --bug left
out) is a false alarm.

It prints a line per step and writes <report>/bugs.json and bugs.md: per
bug, the verdict, the oracle and fault layer of the finding, the run and
minutes of campaign time it took, the replays, the scenario file; then the
totals. With --expect, it fails when a bug the document's table marks found
is not found again.`,
		Example: `  gauntlet bench bugs -f suites/bugbench/reference.yaml --budget 10m
  gauntlet bench bugs -f suites/bugbench/bugs.yaml --bug zk-312 --repo pravega/zookeeper-operator=/src/zookeeper-operator
  gauntlet bench bugs -f suites/bugbench/reference.yaml --expect docs/BENCHMARKS.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "file", "f", "", "the benchmark file (required)")
	fs.StringSliceVar(&f.ids, "bug", nil, "run only this bug (repeat; default every bug in the file)")
	fs.StringSliceVar(&f.repos, "repo", nil, "OPERATOR=PATH: a local git repository for an operator, instead of the file's (repeat)")
	fs.StringVar(&f.out, "report", "", "the run's folder (default artifacts/bench-bugs-<time>)")
	fs.StringVar(&f.expect, "expect", "", "a markdown document whose bug table marks bugs found (on envtest, or on kind with --kind: its \"on\" column): fail when one is not found again")
	fs.BoolVar(&f.onlyExpected, "only-expected", false, "with --expect: run only the bugs the document marks found in this environment")
	fs.Uint64Var(&f.o.Seed, "seed", 1, "seed of every campaign and replay")
	fs.DurationVar(&f.o.Budget, "budget", 30*time.Minute, "campaign time for each buggy source")
	fs.IntVar(&f.o.Sequences, "sequences", 8, "multi-step sequences a campaign tries after every single step")
	fs.IntVar(&f.o.MaxFindings, "max-findings", 0, "end a campaign after so many findings, each a cause of its own (0: at its budget)")
	fs.BoolVar(&f.o.Kind, "kind", false, "campaigns and replays on kind clusters the harness makes, instead of envtest")
	fs.IntVar(&f.o.Shards, "shards", 0, "spread each campaign over this many shards of an Indexed Job on a kind cluster made for it (gauntlet explore --kind --shards); replays stay on envtest here unless --kind")
	fs.BoolVar(&f.o.MultiNode, "multi-node", false, "with --shards or --job: the multi-node kind cluster, so that the shards run on several nodes")
	fs.BoolVar(&f.keepSources, "keep-sources", false, "keep the source trees made under <report>/src")
	f.j.register(cmd)
	fs.StringVar(&f.rejudge, "rejudge", "", "a recorded run's folder: judge its replays again from their reports and rewrite bugs.json and bugs.md; with -f, the bugs as the file states them now, each finding replayed on the fixes added since (no campaign runs again)")
	return cmd
}

func (f *benchBugsFlags) run(cmd *cobra.Command) error {
	if f.rejudge != "" {
		return f.rejudgeRun(cmd)
	}
	if err := f.j.validate(&f.o); err != nil {
		return err
	}
	if f.j.plan != "" {
		// A shard's pod: its findings are the merged run's; it fails only
		// when it could not run its campaign or publish it.
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		_, err := f.runShard(ctx, cmd.ErrOrStderr())
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if f.out == "" {
		f.out = filepath.Join(framework.ArtifactsDir(), "bench-bugs-"+time.Now().UTC().Format("20060102-150405"))
	}
	r, err := f.runner(f.out)
	if err != nil {
		return err
	}
	bugs, err := r.File.Select(f.ids)
	if err != nil {
		return usagef("%v", err)
	}
	var expected []string
	if f.expect != "" {
		if expected, err = bugbench.Expected(f.expect, map[bool]string{true: "kind", false: "envtest"}[f.o.Kind]); err != nil {
			return usagef("--expect: %v", err)
		}
	}
	if f.onlyExpected {
		if f.expect == "" || len(f.ids) > 0 {
			return usagef("--only-expected goes with --expect and without --bug")
		}
		// The document's tables cover other files' bugs too: those of
		// this file it marks found here are run.
		bugs = slices.DeleteFunc(bugs, func(b bugbench.Bug) bool { return !slices.Contains(expected, b.ID) })
		if len(bugs) == 0 {
			return usagef("--only-expected: %s marks found none of the bugs of %s here", f.expect, f.file)
		}
	}
	r.Progress = cmd.ErrOrStderr()
	// An interrupt reaches the campaign or replay running as a child,
	// which tears its envtest or cluster down (selfRunner).
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res *bugbench.Result
	if f.o.Job {
		res, err = f.runJob(ctx, r, bugs, cmd.ErrOrStderr())
	} else {
		res, err = r.Run(ctx, bugs)
	}
	if !f.keepSources {
		err = errors.Join(err, os.RemoveAll(r.Sources.Dir))
	}
	if res != nil {
		_, _ = fmt.Fprint(cmd.OutOrStdout(), res.Markdown())
		_, _ = fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(f.out, "bugs.md"))
	}
	if err != nil {
		return err
	}
	if lost := res.Regressions(expected); len(lost) > 0 {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "%d bugs %s marks found were not found again:\n  %s\n", len(lost), f.expect, strings.Join(lost, "\n  "))
		return errFailedRun
	}
	return nil
}

// validate refuses a benchmark run's flags that cannot work.
func (f *benchBugsFlags) validate() error {
	switch {
	case f.file == "":
		return usagef("-f (the benchmark file) is required")
	case f.o.Budget <= 0 || f.o.Sequences < 0 || f.o.MaxFindings < 0 || f.o.Shards < 0:
		return usagef("--budget must be positive, --sequences, --max-findings and --shards not negative")
	case f.o.Shards == 1:
		return usagef("--shards 1: give 2 or more")
	case f.o.MultiNode && f.o.Shards == 0 && !f.o.Job:
		return usagef("--multi-node goes with --shards or --job")
	}
	return nil
}

// runner is the benchmark's runner for the file and flags, writing into
// out.
func (f *benchBugsFlags) runner(out string) (*bugbench.Runner, error) {
	repos := map[string]string{}
	for _, r := range f.repos {
		op, path, ok := strings.Cut(r, "=")
		if !ok || op == "" || path == "" {
			return nil, usagef("--repo %q: want OPERATOR=PATH", r)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		repos[op] = abs
	}
	file, err := bugbench.Load(f.file)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if out, err = filepath.Abs(out); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return &bugbench.Runner{
		File: file, Options: f.o, Out: out, Gauntlet: selfRunner(self),
		Sources: &bugbench.Sources{Repos: repos, Cache: filepath.Join(cache, "gauntlet", "bugbench"), Dir: filepath.Join(out, "src")},
	}, nil
}

// rejudgeRun judges a recorded run's replays again and rewrites its
// results; with -f (and --repo), the bugs are taken as the file states
// them now, findings are replayed on fixes added since (Runner.Update),
// and the fixes' ancestry comes from the operators' repositories.
func (f *benchBugsFlags) rejudgeRun(cmd *cobra.Command) error {
	dir := f.rejudge
	res, err := bugbench.ReadResult(dir)
	if err != nil {
		return usagef("--rejudge: %v", err)
	}
	if f.file != "" {
		r, err := f.runner(dir)
		if err != nil {
			return err
		}
		r.Progress = cmd.ErrOrStderr() // the replays on fixes added since take minutes each
		if err := r.Update(cmd.Context(), res); err != nil {
			return err
		}
	}
	if err := bugbench.Rejudge(res); err != nil {
		return err
	}
	if err := res.Write(dir); err != nil {
		return err
	}
	_, _ = fmt.Fprint(cmd.OutOrStdout(), res.Markdown())
	return nil
}

// childTeardown is how long a cancelled campaign or replay has to tear
// down before it is killed.
const childTeardown = 2 * time.Minute

// selfRunner runs this binary's own commands as child processes, each
// one's output into its log: a campaign that crashes loses only itself.
func selfRunner(self string) bugbench.Gauntlet {
	return func(ctx context.Context, args []string, log string) (int, error) {
		if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
			return 0, err
		}
		out, err := os.Create(log)
		if err != nil {
			return 0, err
		}
		defer func() { _ = out.Close() }()
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Stdout, cmd.Stderr = out, out
		// Cancelled, the child is asked to stop as an interrupt asks it
		// (its envtest, operator and clusters torn down), and killed only
		// if it has not within childTeardown.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = childTeardown
		err = cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), nil
		}
		return 0, err
	}
}
