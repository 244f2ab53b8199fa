package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/explore"
	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/cmd/gauntlet/bench"
	"github.com/gauntlet-dev/gauntlet/framework"
)

type exploreFlags struct {
	runFlags
	onKind bool
	o      explore.Options
	s      shardFlags
}

func newExploreCmd() *cobra.Command {
	f := &exploreFlags{}
	cmd := &cobra.Command{
		Use:   "explore",
		Short: "Try changes to the custom resource generated from its CRD, judged by automatic oracles",
		Long: `explore takes the Operator file and a Scenario file you already have and,
with no assertion written, tries changes to the custom resource's spec
generated from its CRD's schema: every value at the bounds, every enum
member, the default, the other boolean, strings at their length bound, one
at a time and in seeded sequences spread among them. The API server's dry run sorts out
what it refuses (the schema and its CEL rules at work). Each run is judged
by automatic oracles: the resource settles (its converged expressions hold
within convergeWithin), it stays settled (stableFor), and it ends as a
fresh resource created with its final spec does (the differential oracle).
A failing sequence is shrunk to the fewest steps that still fail and
written as a scenario file under <report>/findings, which gauntlet run -f
replays.

It runs on envtest by default (the operator as a process behind the API
proxy, as its Operator file's spec.process says; no Docker), on kind with
--kind. With --shards n it runs as n shards of an Indexed Job on a
cluster (a kind cluster made here, or --kubeconfig's): the same seed and
plan, shard k taking the sequences i with i mod n == k on its own envtest
in its pod, and one report merged from theirs.`,
		Example: `  gauntlet explore -f suites/view/scenarios --seed 1
  gauntlet explore -f my-operator/scenarios --base scale-up --budget 10m --kind
  gauntlet explore -f suites/view/scenarios --seed 1 --shards 3 --kind --multi-node --budget 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.envtest = !f.onKind
			sharded := f.s.shards > 0
			if sharded {
				// The coordinator runs no engine: its shards run envtest.
				f.envtest = false
			}
			if err := f.s.validate(f); err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			if f.seed < 0 {
				f.seed = time.Now().UnixNano() % 1_000_000
			}
			f.o.Seed = uint64(f.seed)
			if f.report == "" {
				f.report = filepath.Join(framework.ArtifactsDir(), "explore-"+time.Now().UTC().Format("20060102-150405"))
			}
			f.o.Artifacts = f.report
			f.proxy = !f.o.NoFaults
			if sharded {
				return f.runShards(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return withEngine(cmd.Context(), &f.runFlags, nil, cmd.OutOrStdout(), cmd.ErrOrStderr(), f.explore)
		},
	}
	f.register(cmd, false)
	fs := cmd.Flags()
	fs.Int64Var(&f.seed, "seed", -1, "seed of the plan and of every run (default: from the clock, printed); replays the campaign")
	fs.StringVar(&f.o.Base, "base", "", "the scenario whose resource, converged expressions and variables the campaign starts from (default: the first)")
	fs.IntVar(&f.o.Sequences, "sequences", 10, "multi-step sequences tried after every single step")
	fs.IntVar(&f.o.MaxSteps, "max-steps", 3, "steps in a sequence, at most")
	fs.DurationVar(&f.o.Budget, "budget", 30*time.Minute, "no new run starts once the campaign has taken this long")
	fs.BoolVar(&f.o.NoShrink, "no-shrink", false, "write failing sequences as they are, unshrunk")
	fs.IntVar(&f.o.MaxFindings, "max-findings", 0, "end the campaign once it has found so many (0: no limit)")
	fs.BoolVar(&f.o.NoFaults, "no-faults", false, "run every sequence without a fault (by default each fault made from what the operator did in the reference run (view faults; on a cluster a pod kill of each role) is held once early, every other run, while one value changes, then over half the sequences of two steps or more)")
	fs.StringSliceVar(&f.o.SkipFields, "skip-field", nil, "a spec field (spec.a.b) to leave alone, with what is under it (repeat): a value this environment cannot run")
	fs.BoolVar(&f.onKind, "kind", false, "run on a kind cluster the harness creates (or --kubeconfig) instead of envtest")
	_ = fs.MarkHidden("envtest")
	f.s.register(cmd)
	return cmd
}

func (f *exploreFlags) explore(ctx context.Context, e *engine.Engine, _ engine.RunOptions, prog *progress, stdout io.Writer) error {
	prog.Phase("explore")
	rep, x, err := explore.Run(ctx, e, f.o)
	prog.Done()
	prog.Clear()
	if x != nil {
		_, _ = fmt.Fprint(stdout, x.Summary(f.loaded.OperatorFile, false))
		if werr := bench.WriteFigures(filepath.Join(f.o.Artifacts, "figures.json"), exploreFigures(x)); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if rep != nil {
		_, _ = fmt.Fprintf(stdout, "report: %s\n", filepath.Join(f.o.Artifacts, htmlreport.FileName))
	}
	if err != nil {
		return err
	}
	if f.s.publish {
		// A shard's findings are the merged report's; its pod fails only
		// when it could not run its share.
		return publishShard(ctx, f.o.Artifacts)
	}
	if len(x.Findings) > 0 || len(x.VersionSkews) > 0 {
		return errFailedRun
	}
	return nil
}

// exploreFigures are a campaign's figures for gauntlet bench table (make
// bench): fields covered and how soon, pace, runs and findings.
func exploreFigures(x *report.Campaign) []bench.Figure {
	note := fmt.Sprintf("from %s, seed %d", x.Base, x.Seed)
	all := bench.Figure{Name: "explore: time to change every field", Value: x.AllCoveredAfter.Minutes(), Unit: "min",
		Better: bench.LowerIsBetter, Goal: &bench.Goal{Value: 30, Source: "issue 26"}, Note: note}
	if x.AllCoveredAfter == 0 {
		all.Value, all.Note = x.Took.Minutes(), note+"; not every field in this campaign"
		all.Goal = &bench.Goal{Value: 0, Source: "issue 26: every field"}
	}
	return []bench.Figure{
		{Name: "explore: fields changed by some run", Value: float64(len(x.Covered)), Unit: "fields", Better: bench.HigherIsBetter,
			Goal: &bench.Goal{Value: float64(len(x.Fields)), Source: "issue 26: every field generated for"}, Note: note},
		all,
		{Name: "explore: steps per minute", Value: x.StepsPerMinute, Unit: "steps/min", Better: bench.HigherIsBetter, Note: note},
		{Name: "explore: runs", Value: float64(x.Runs), Unit: "runs", Better: bench.HigherIsBetter, Note: note},
		{Name: "explore: findings", Value: float64(len(x.Findings) + len(x.VersionSkews)), Unit: "findings", Better: bench.LowerIsBetter,
			Goal: &bench.Goal{Value: 0, Source: "issue 26: the unmodified operator"}, Note: note},
	}
}
