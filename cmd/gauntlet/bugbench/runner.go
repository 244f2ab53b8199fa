package bugbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// Gauntlet runs one gauntlet command (explore or run) with args, its
// output into the file log, and returns its exit status: 0 passed, 1
// failed (a finding, a failed scenario), anything else an error.
type Gauntlet func(ctx context.Context, args []string, log string) (int, error)

// Runner runs a benchmark: one campaign per buggy source (bugs that share
// a commit share it), every finding replayed on that source and on each
// of its bugs' fixes, and a verdict per bug.
type Runner struct {
	File     *File
	Options  Options
	Sources  *Sources
	Gauntlet Gauntlet
	// Out is the run's folder: campaigns/, replays/, bugs.json, bugs.md.
	Out string
	// Progress gets a line per step: what, and how long it took.
	Progress io.Writer

	built map[string][]string // the --set flags of each tree's images, by tree
}

// Run runs the campaigns of bugs and writes the results.
func (r *Runner) Run(ctx context.Context, bugs []Bug) (*Result, error) {
	start := time.Now()
	res := &Result{Seed: r.Options.Seed, Budget: r.Options.Budget.String(), Kind: r.Options.Kind,
		Shards: r.Options.Shards, MultiNode: r.Options.MultiNode}
	for _, group := range groups(bugs) {
		b := r.File.Bench(group[0], r.Options.Kind)
		if b == nil {
			for _, bug := range group {
				res.Bugs = append(res.Bugs, BugResult{Bug: bug, Verdict: NotRun, Why: "its operator has no bench stanza: it has not come through the door yet"})
			}
			continue
		}
		c := r.campaign(ctx, group, b)
		res.Campaigns = append(res.Campaigns, c)
		res.Bugs = append(res.Bugs, judge(group, c)...)
		// Written after each campaign: a run cut short keeps what it found.
		res.Took, res.Totals = time.Since(start), total(res)
		if err := res.Write(r.Out); err != nil {
			return res, err
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	res.Took, res.Totals = time.Since(start), total(res)
	return res, res.Write(r.Out)
}

// groups are the bugs by buggy source, in the order of their first bug.
func groups(bugs []Bug) [][]Bug {
	var keys []string
	by := map[string][]Bug{}
	for _, b := range bugs {
		k := b.Buggy().Key()
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], b)
	}
	out := make([][]Bug, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

func (r *Runner) logf(format string, args ...any) {
	if r.Progress != nil {
		_, _ = fmt.Fprintf(r.Progress, ">> %s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// leftOut are the file's bugs of c's buggy source that c does not judge
// (a run given --bug): a finding may be one of them.
func (r *Runner) leftOut(c Campaign) []string {
	var out []string
	for _, bug := range r.File.Bugs {
		if bug.Buggy().Key() == c.Tree && !slices.Contains(c.Bugs, bug.ID) {
			out = append(out, bug.ID)
		}
	}
	return out
}

// campaign explores the group's buggy source and replays every finding.
func (r *Runner) campaign(ctx context.Context, group []Bug, b *Bench) Campaign {
	tree := group[0].Buggy()
	c := Campaign{Tree: tree.Key(), Report: filepath.Join(r.Out, "campaigns", tree.Key())}
	for _, bug := range group {
		c.Bugs = append(c.Bugs, bug.ID)
	}
	c.LeftOut = r.leftOut(c)
	start := time.Now()
	defer func() { c.Took = time.Since(start) }()
	src, err := r.source(ctx, tree, b)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	r.logf("%s: explore (bugs %v, budget %s)", c.Tree, c.Bugs, r.Options.Budget)
	args := append([]string{"explore", "-f", b.Scenarios, "--base", b.Base, "--seed", strconv.FormatUint(r.Options.Seed, 10),
		"--budget", r.Options.Budget.String(), "--sequences", strconv.Itoa(r.Options.Sequences),
		"--max-findings", strconv.Itoa(r.Options.MaxFindings), "--report", c.Report}, src...)
	for _, f := range b.SkipFields {
		args = append(args, "--skip-field", f)
	}
	if r.Options.Kind || r.Options.Shards > 0 {
		args = append(args, "--kind") // the shards' pods run on a kind cluster
	}
	if r.Options.Shards > 0 {
		args = append(args, "--shards", strconv.Itoa(r.Options.Shards))
		if r.Options.MultiNode {
			args = append(args, "--multi-node")
		}
	}
	code, err := r.Gauntlet(ctx, args, c.Report+".log")
	x, rerr := readCampaign(c.Report)
	switch {
	case err != nil:
		c.Error = err.Error()
		return c
	case code != 0 && code != 1 || rerr != nil:
		c.Error = fmt.Sprintf("gauntlet explore exited %d (log: %s.log): %v", code, c.Report, rerr)
		return c
	}
	c.Runs, c.Explored = x.Runs, x.Took
	r.logf("%s: %d runs in %s, %d findings", c.Tree, x.Runs, x.Took.Round(time.Second), len(x.Findings))
	opFile, err := operatorFile(b.Scenarios)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	if c.Earlier, err = r.earlierFixes(ctx, group, b); err != nil {
		c.Error = err.Error()
		return c
	}
	// One replay per cause (the oracle and where it broke): the other
	// findings of a cause are listed, not run again.
	first := map[string]string{}
	for _, cause := range report.GroupFindings(x.Findings) {
		for _, name := range cause.Findings {
			first[name] = cause.Findings[0]
		}
	}
	for _, f := range x.Findings {
		if same := first[f.Scenario]; same != f.Scenario {
			c.Findings = append(c.Findings, Finding{Finding: f, SameCauseAs: same})
			continue
		}
		c.Findings = append(c.Findings, r.replay(ctx, group, b, opFile, f))
	}
	return c
}

// source makes the tree, and the bench's fixed trees, and returns the
// --set flags that hand them to the Operator file.
func (r *Runner) source(ctx context.Context, t Tree, b *Bench) ([]string, error) {
	start := time.Now()
	dir, err := r.Sources.Make(ctx, t, b)
	if err != nil {
		return nil, err
	}
	r.logf("%s: source in %s (%s)", t.Key(), dir, time.Since(start).Round(time.Millisecond))
	set := []string{"--set", b.Variable + "=" + filepath.Join(dir, b.Subdir)}
	for _, v := range slices.Sorted(maps.Keys(b.Trees)) {
		own, err := r.descends(ctx, t, b.Trees[v], b)
		if err != nil {
			return nil, err
		}
		if own {
			set = append(set, "--set", v+"="+dir)
			continue
		}
		fixed, err := r.Sources.Make(ctx, Tree{Operator: t.Operator, Commit: b.Trees[v]}, b)
		if err != nil {
			return nil, err
		}
		set = append(set, "--set", v+"="+fixed)
	}
	built, err := r.images(ctx, t, b, dir)
	return append(set, built...), err
}

// replay runs a finding's scenario file on the buggy source and, when it
// fails there, on each fix of the group's bugs: one that does not fail on
// its own source is irreproducible, and its replays on the fixes would
// tell nothing.
func (r *Runner) replay(ctx context.Context, group []Bug, b *Bench, opFile string, f report.Finding) Finding {
	out := Finding{Finding: f}
	out.OnBuggy = r.replayOn(ctx, group[0].Buggy(), b, opFile, f)
	if out.OnBuggy.Verdict == Fails {
		r.replayOnFixes(ctx, group, b, opFile, &out)
	}
	return out
}

// replayOnFixes runs the finding's scenario file on each fix of the
// group's bugs it has not run on yet.
func (r *Runner) replayOnFixes(ctx context.Context, group []Bug, b *Bench, opFile string, f *Finding) {
	for _, bug := range group {
		fix, ok := bug.Fixed()
		if _, done := f.OnFixes[fix.Key()]; !ok || done {
			continue
		}
		if f.OnFixes == nil {
			f.OnFixes = map[string]Replay{}
		}
		tree := r.fixTree(ctx, fix, b)
		rep := r.replayOn(ctx, tree, b, opFile, f.Finding)
		if tree != fix {
			rep.Tree = tree.Key()
		}
		f.OnFixes[fix.Key()] = rep
	}
}

// fixTree is the tree a fix is replayed on: the fix's own change on the
// buggy commit, or where that change does not apply there, the fix
// commit's whole tree (which carries every other change since).
func (r *Runner) fixTree(ctx context.Context, fix Tree, b *Bench) Tree {
	if fix.Pick == "" {
		return fix
	}
	_, err := r.Sources.Make(ctx, fix, b)
	if !errors.Is(err, errPickDoesNotApply) {
		return fix // made, or an error its replay reports
	}
	r.logf("%s: %v; replaying on %s instead", fix.Key(), err, fix.Whole().Key())
	return fix.Whole()
}

func (r *Runner) replayOn(ctx context.Context, t Tree, b *Bench, opFile string, f report.Finding) Replay {
	src, err := r.source(ctx, t, b)
	if err != nil {
		return Replay{Error: err.Error()}
	}
	dir := filepath.Join(r.Out, "replays", f.Scenario+"-on-"+t.Key())
	args := append([]string{"run", "-f", opFile, "-f", f.File, "--seed", strconv.FormatUint(r.Options.Seed, 10),
		"--report", dir}, src...)
	if !r.Options.Kind {
		args = append(args, "--envtest")
	}
	start := time.Now()
	code, err := r.Gauntlet(ctx, args, dir+".log")
	rep := Replay{Report: dir, Took: time.Since(start)}
	switch {
	case err != nil:
		rep.Error = err.Error()
	case code == 0:
		rep.Verdict = Passes
	case code == 1:
		rep, err = judgeReplay(dir, f, rep)
		if err != nil {
			rep.Error = err.Error()
		}
	default:
		rep.Error = fmt.Sprintf("gauntlet run exited %d (log: %s.log)", code, dir)
	}
	r.logf("%s replayed on %s: %s in %s", f.Scenario, t.Key(), rep, rep.Took.Round(time.Second))
	return rep
}

// judgeReplay judges a failed replay as the campaign judged the run: it
// fails when it broke the finding's oracle (first or after another),
// passes when it broke none (a spec the operator refused in a condition
// naming the field is no failure, as in explore), and is Other when it
// broke only others: on a fix, that alone tells nothing of the bug. It
// also lists every oracle the run broke, and where its end state
// differed from its twin's or a fresh resource's.
func judgeReplay(dir string, f report.Finding, r Replay) (Replay, error) {
	rep, err := report.ReadReport(filepath.Join(dir, "report.json"))
	if err != nil {
		return r, err
	}
	res := rep.Result(f.Scenario)
	if res == nil {
		return r, fmt.Errorf("%s holds no result of %s", dir, f.Scenario)
	}
	r.Differences, r.Broken = nil, nil
	if res.Twin != nil {
		for _, d := range res.Twin.Differences {
			r.Differences = append(r.Differences, d.Path)
		}
	}
	r.Oracle, _ = report.Oracle(res, f.Fields)
	r.Broken = report.BrokenOracles(res, f.Fields)
	switch {
	case slices.Contains(r.Broken, f.Oracle):
		r.Verdict = Fails
	case len(r.Broken) == 0:
		r.Verdict = Passes
	default:
		r.Verdict = Other
	}
	return r, nil
}

func readCampaign(dir string) (*report.Campaign, error) {
	b, err := os.ReadFile(filepath.Join(dir, "explore.json"))
	if err != nil {
		return nil, err
	}
	x := &report.Campaign{}
	return x, json.Unmarshal(b, x)
}

// operatorFile is the Operator file of the folder; mistakes in it are
// the campaign's to report (the variables it names are unset here).
func operatorFile(dir string) (string, error) {
	set, err := scenario.LoadPaths(dir)
	if set != nil && set.OperatorFile != "" {
		return set.OperatorFile, nil
	}
	return "", errors.Join(errors.New(dir+" holds no Operator file"), err)
}

// Layer names a fault action's layer: what the finding needed besides
// its spec changes. On envtest a pod kill is the simulated controllers'
// (the pod made again only at the heal), not Chaos Mesh's.
func Layer(action string, envtest bool) string {
	switch {
	case action == "":
		return "none (spec changes alone)"
	case scenario.IsViewAction(action):
		return "operator's view (API proxy): " + action
	case action == scenario.ActionPodKill && envtest:
		return "envtest's simulated pods: pod-kill, made again at the heal"
	case slices.Contains(scenario.ChaosActions, action):
		return "cluster (Chaos Mesh): " + action
	}
	return action
}

// Rejudge judges a recorded run's replays again, from their reports, and
// recomputes every verdict and total: a run made before the judgement
// changed needs no campaign run again (Runner.Update first brings it up
// to a benchmark file: its fixes, their replays and ancestry).
func Rejudge(res *Result) error {
	bugs := map[string]Bug{}
	for _, b := range res.Bugs {
		bugs[b.Bug.ID] = b.Bug
	}
	var out []BugResult
	for ci := range res.Campaigns {
		c := &res.Campaigns[ci]
		for fi := range c.Findings {
			f := &c.Findings[fi]
			if len(f.Fields) == 0 {
				f.Fields = fieldsOf(f.Shrunk) // recorded before findings carried them
			}
			var err error
			if f.OnBuggy, err = rejudge(f.OnBuggy, f.Finding); err != nil {
				return err
			}
			for k, r := range f.OnFixes {
				if f.OnFixes[k], err = rejudge(r, f.Finding); err != nil {
					return err
				}
			}
		}
		var group []Bug
		for _, id := range c.Bugs {
			group = append(group, bugs[id])
		}
		out = append(out, judge(group, *c)...)
	}
	for _, b := range res.Bugs {
		if b.Verdict == NotRun {
			out = append(out, b)
		}
	}
	res.Bugs = out
	res.Totals = total(res)
	return nil
}

// rejudge reads a failed replay's report again.
func rejudge(r Replay, f report.Finding) (Replay, error) {
	if (r.Verdict != Fails && r.Verdict != Other) || r.Report == "" {
		return r, nil
	}
	r, err := judgeReplay(r.Report, f, r)
	if err != nil {
		return r, fmt.Errorf("%s: %w", r.Report, err)
	}
	return r, nil
}

// fieldsOf reads the fields back from shrunk steps as explore prints them
// ("spec.a.b=value (in a new spec.a) at creation", "spec.a back as it
// was"): each step's field, and the parent it was set inside.
func fieldsOf(shrunk []string) []string {
	var out []string
	for _, step := range shrunk {
		field, _, _ := strings.Cut(step, "=")
		field, _, _ = strings.Cut(field, " back as it was")
		out = append(out, field)
		if _, rest, ok := strings.Cut(step, "(in a new "); ok {
			if parent, _, ok := strings.Cut(rest, ")"); ok {
				out = append(out, parent)
			}
		}
	}
	return out
}

// Update brings a recorded run up to the benchmark file before it is
// judged again: each bug as the file states it now, and each replayed
// finding run on every fix of its campaign it was not run on (a fix
// written since the campaign), with the fixes' ancestry made again.
func (r *Runner) Update(ctx context.Context, res *Result) error {
	now := map[string]Bug{}
	for i := range res.Bugs {
		bug, err := r.File.Select([]string{res.Bugs[i].Bug.ID})
		if err != nil {
			return err
		}
		res.Bugs[i].Bug, now[bug[0].ID] = bug[0], bug[0]
	}
	for ci := range res.Campaigns {
		c := &res.Campaigns[ci]
		var group []Bug
		for _, id := range c.Bugs {
			group = append(group, now[id])
		}
		c.LeftOut = r.leftOut(*c)
		b := r.File.Bench(group[0], r.Options.Kind)
		if b == nil || c.Error != "" {
			continue
		}
		opFile, err := operatorFile(b.Scenarios)
		if err != nil {
			return err
		}
		for fi := range c.Findings {
			f := &c.Findings[fi]
			if f.SameCauseAs == "" && f.OnBuggy.Verdict == Fails {
				r.replayOnFixes(ctx, group, b, opFile, f)
			}
		}
		if c.Earlier, err = r.earlierFixes(ctx, group, b); err != nil {
			return err
		}
	}
	return ctx.Err()
}
