package bugbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// A benchmark as shards of an Indexed Job: where git and a toolchain are,
// every source tree a campaign and its replays run on is made and built
// (Prepare); a shard's pod, which has neither, runs one campaign of the
// plan (RunPlanned); the shards' results are merged into one (Merge).

// Plan is a benchmark made ready to run as shards: plan.json of their
// bundle. Shard k runs Campaigns[k].
type Plan struct {
	Options   Options   `json:"options"`
	Campaigns []Planned `json:"campaigns"`
	// NotRun are the selected bugs whose operator has no bench stanza.
	NotRun []BugResult `json:"notRun,omitempty"`
}

// Planned is one campaign of a plan.
type Planned struct {
	// Campaign is the campaign before it runs (Runner.plan); one whose
	// buggy source could not be made carries the error.
	Campaign Campaign `json:"campaign"`
	Group    []Bug    `json:"group"`
	Bench    Bench    `json:"bench"`
	// Trees are the folders of scenario files of the sources its
	// campaign and replays run on, by key, as a shard's pod sees them.
	Trees map[string]string `json:"trees"`
}

// Bundle puts a made source into the shards' bundle: given its key, the
// bench's folder of scenario files and the --set values that hand the
// trees to its Operator file, it returns the bundled folder of scenario
// files as a shard's pod sees it.
type Bundle func(ctx context.Context, key, scenarios string, set map[string]string) (string, error)

// Prepare makes every source the bugs' campaigns and replays run on (the
// buggy source of each campaign, each fix of its bugs) and bundles each
// once. A buggy source that cannot be made is its campaign's error; a fix
// that cannot be, its replays' (logged here).
func (r *Runner) Prepare(ctx context.Context, bugs []Bug, bundle Bundle) (*Plan, error) {
	plan := &Plan{Options: r.Options}
	made := map[string]string{}
	for _, group := range groups(bugs) {
		b := r.File.Bench(group[0], false)
		if b == nil {
			plan.NotRun = append(plan.NotRun, notRun(group)...)
			continue
		}
		c, err := r.plan(ctx, group, b)
		p := Planned{Campaign: c, Group: group, Bench: *b, Trees: map[string]string{}}
		if err != nil {
			plan.Campaigns = append(plan.Campaigns, p)
			continue
		}
		for i, t := range r.treesOf(ctx, group, b) {
			k := t.Key()
			if _, ok := made[k]; !ok {
				dir, err := r.bundle(ctx, t, b, bundle)
				switch {
				case err != nil && i == 0:
					p.Campaign.Error = err.Error()
				case err != nil:
					r.logf("%s: %v (its replays will say it was not made ready)", k, err)
				default:
					made[k] = dir
				}
			}
			if dir, ok := made[k]; ok {
				p.Trees[k] = dir
			}
		}
		plan.Campaigns = append(plan.Campaigns, p)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// treesOf are the sources a group's campaign and replays run on: its
// buggy source first, then each fix as it is replayed on.
func (r *Runner) treesOf(ctx context.Context, group []Bug, b *Bench) []Tree {
	trees := []Tree{group[0].Buggy()}
	for _, bug := range group {
		if fix, ok := bug.Fixed(); ok {
			trees = append(trees, r.fixTree(ctx, fix, b))
		}
	}
	return trees
}

// bundle makes a source and bundles it.
func (r *Runner) bundle(ctx context.Context, t Tree, b *Bench, bundle Bundle) (string, error) {
	set, err := r.make(ctx, t, b)
	if err != nil {
		return "", err
	}
	start := time.Now()
	dir, err := bundle(ctx, t.Key(), b.Scenarios, setValues(set))
	if err != nil {
		return "", fmt.Errorf("bundling %s: %w", t.Key(), err)
	}
	r.logf("%s: built into the shards' bundle in %s", t.Key(), time.Since(start).Round(time.Second))
	return dir, nil
}

// setValues are --set flags as a map.
func setValues(flags []string) map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(flags); i += 2 {
		if k, v, ok := strings.Cut(flags[i+1], "="); flags[i] == "--set" && ok {
			out[k] = v
		}
	}
	return out
}

// WritePlan writes the plan as JSON to path; ReadPlan reads it back.
func WritePlan(plan *Plan, path string) error {
	b, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadPlan reads a plan WritePlan wrote.
func ReadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	plan := &Plan{}
	if err := json.Unmarshal(b, plan); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return plan, nil
}

// RunPlanned runs one campaign of a plan, on the sources made ready for
// it (r.Trees is p.Trees), and writes its results as Run does.
func (r *Runner) RunPlanned(ctx context.Context, p Planned) (*Result, error) {
	start := time.Now()
	r.Trees = p.Trees
	res := r.result()
	c := p.Campaign
	if c.Error == "" {
		c = r.explore(ctx, c, p.Group, &p.Bench)
	}
	return res, r.add(ctx, res, c, p.Group, start)
}

// Merge is a plan's run from its shards' results: shard k's folder in
// dirs (where its pod's paths under from now lie), or, missing, its
// campaign with an error; the bugs no campaign judged; the totals; took
// is the run's wall time.
func Merge(plan *Plan, dirs map[int]string, from string, took time.Duration) *Result {
	res := newResult(plan.Options)
	res.Took = took
	for k, p := range plan.Campaigns {
		part, err := readPart(dirs[k])
		if err != nil {
			c := p.Campaign
			c.Error = fmt.Sprintf("shard %d: %v", k, err)
			res.Campaigns = append(res.Campaigns, c)
			res.Bugs = append(res.Bugs, judge(p.Group, c)...)
			continue
		}
		part.rebase(from, dirs[k])
		res.Campaigns = append(res.Campaigns, part.Campaigns...)
		res.Bugs = append(res.Bugs, part.Bugs...)
	}
	res.Bugs = append(res.Bugs, plan.NotRun...)
	res.Totals = total(res)
	return res
}

// readPart reads a shard's results.
func readPart(dir string) (*Result, error) {
	if dir == "" {
		return nil, fmt.Errorf("published no results (the end of its pod's log is in the run's output)")
	}
	return ReadResult(dir)
}

// rebase moves the result's paths from under one folder to under another.
func (res *Result) rebase(from, to string) {
	for i := range res.Campaigns {
		c := &res.Campaigns[i]
		c.Report = rebase(c.Report, from, to)
		for fi := range c.Findings {
			c.Findings[fi].rebase(from, to)
		}
	}
	for _, b := range res.Bugs {
		if b.Finding != nil {
			b.Finding.rebase(from, to)
		}
	}
}

func (f *Finding) rebase(from, to string) {
	f.File = rebase(f.File, from, to)
	f.OnBuggy.Report = rebase(f.OnBuggy.Report, from, to)
	for k, r := range f.OnFixes {
		r.Report = rebase(r.Report, from, to)
		f.OnFixes[k] = r
	}
}

func rebase(path, from, to string) string {
	if rest, ok := strings.CutPrefix(path, from); ok && (rest == "" || rest[0] == '/') {
		return to + rest
	}
	return path
}
