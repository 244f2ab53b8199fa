package engine

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/parallel"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// RunOptions select and shape a run of the set.
type RunOptions struct {
	// Seed drives every choice; scenario i gets ScenarioSeed(Seed, i).
	Seed uint64
	// Seeds pins the seed of named scenarios (a replay).
	Seeds map[string]uint64
	// Only selects scenarios by name (all when empty).
	Only []string
	// Artifacts is the run's folder.
	Artifacts string
	// Parallel is how many scenarios that can share the cluster run at
	// once, each in its own namespace (package parallel); one or less
	// runs them one after another.
	Parallel int
}

// ScenarioSeed derives the seed of the i-th scenario from the run's.
func ScenarioSeed(seed uint64, i int) uint64 { return seed*1_000_003 + uint64(i) }

// RunAll runs the selected scenarios, Parallel at a time where they can
// share the cluster, writing the report (json, junit, summary, html) as
// each is judged.
func (e *Engine) RunAll(ctx context.Context, o RunOptions) (*report.Report, error) {
	var picked []*scenario.Scenario
	var seeds []uint64
	var jobs []parallel.Job
	for i, s := range e.o.Set.Scenarios {
		if len(o.Only) > 0 && !slices.Contains(o.Only, s.Metadata.Name) {
			continue
		}
		seed, pinned := o.Seeds[s.Metadata.Name]
		if !pinned {
			seed = ScenarioSeed(o.Seed, i)
		}
		picked, seeds = append(picked, s), append(seeds, seed)
		jobs = append(jobs, parallel.Job{Name: s.Metadata.Name, Alone: s.Alone()})
	}
	if o.Parallel > 1 && e.view != nil {
		e.logf("the API proxy's view of the operator serves every scenario: they run one after another")
		o.Parallel = 1
	}
	rep := report.NewReport(o.Seed, e.Name())
	var werr error
	results := parallel.Run(ctx, jobs, parallel.Options{Workers: o.Parallel, Log: e.logf,
		Run: func(ctx context.Context, i int, alone bool) *report.Result {
			dir := o.Artifacts
			if alone {
				dir = filepath.Join(dir, "alone")
			}
			return e.Run(ctx, picked[i], seeds[i], dir)
		},
		Done: func(i int, res *report.Result) {
			e.logf("%s: %s in %s", jobs[i].Name, res.Verdict(), res.Took.Round(time.Second))
			rep.Results = append(rep.Results, res)
			rep.Took = time.Since(rep.Started)
			if err := htmlreport.Save(rep, o.Artifacts); err != nil && werr == nil {
				werr = err
			}
		}})
	rep.Results = slices.DeleteFunc(results, func(r *report.Result) bool { return r == nil })
	rep.Took = time.Since(rep.Started)
	switch {
	case werr != nil:
		return rep, werr
	case ctx.Err() != nil:
		return rep, ctx.Err()
	}
	return rep, htmlreport.Save(rep, o.Artifacts)
}
