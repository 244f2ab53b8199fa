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
	// Trees, in a shard's pod, are the source trees made and built
	// beforehand (Prepare), by key: each a folder of scenario files whose
	// Operator file starts the tree's binary. Nil: trees are made here
	// from the operators' repositories (Sources).
	Trees map[string]string

	built map[string][]string // the --set flags of each tree's images, by tree
}

// Run runs the campaigns of bugs and writes the results.
func (r *Runner) Run(ctx context.Context, bugs []Bug) (*Result, error) {
	start := time.Now()
	res := r.result()
	for _, group := range groups(bugs) {
		b := r.File.Bench(group[0], r.Options.Kind)
		if b == nil {
			res.Bugs = append(res.Bugs, notRun(group)...)
			continue
		}
		c, err := r.plan(ctx, group, b)
		if err == nil {
			c = r.explore(ctx, c, group, b)
		}
		if err := r.add(ctx, res, c, group, start); err != nil {
			return res, err
		}
	}
	res.Took, res.Totals = time.Since(start), total(res)
	return res, res.Write(r.Out)
}

func (r *Runner) result() *Result { return newResult(r.Options) }

// newResult is an empty result of a run with the options o.
func newResult(o Options) *Result {
	return &Result{Seed: o.Seed, Budget: o.Budget.String(), Kind: o.Kind, Shards: o.Shards, MultiNode: o.MultiNode, Job: o.Job}
}

// notRun are the verdicts of bugs whose operator has no bench stanza.
func notRun(group []Bug) []BugResult {
	var out []BugResult
	for _, bug := range group {
		out = append(out, BugResult{Bug: bug, Verdict: NotRun, Why: "its operator has no bench stanza: it has not come through the door yet"})
	}
	return out
}

// add records a campaign and its bugs' verdicts, and writes the results
// so far: a run cut short keeps what it found.
func (r *Runner) add(ctx context.Context, res *Result, c Campaign, group []Bug, start time.Time) error {
	res.Campaigns = append(res.Campaigns, c)
	res.Bugs = append(res.Bugs, judge(group, c)...)
	res.Took, res.Totals = time.Since(start), total(res)
	if err := res.Write(r.Out); err != nil {
		return err
	}
	return ctx.Err()
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

// plan is the group's campaign before it runs: its buggy source, its
// bugs, the file's bugs it leaves out, and which of its fixes are earlier
// than which (read from the operator's repository). An error is the
// campaign's: it is recorded in it.
func (r *Runner) plan(ctx context.Context, group []Bug, b *Bench) (Campaign, error) {
	tree := group[0].Buggy()
	c := Campaign{Tree: tree.Key()}
	for _, bug := range group {
		c.Bugs = append(c.Bugs, bug.ID)
	}
	c.LeftOut = r.leftOut(c)
	var err error
	if c.Earlier, err = r.earlierFixes(ctx, group, b); err != nil {
		c.Error = err.Error()
	}
	return c, err
}

// explore explores the group's buggy source and replays every finding.
func (r *Runner) explore(ctx context.Context, c Campaign, group []Bug, b *Bench) Campaign {
	tree := group[0].Buggy()
	c.Report = filepath.Join(r.Out, "campaigns", tree.Key())
	start := time.Now()
	defer func() { c.Took = time.Since(start) }()
	src, err := r.source(ctx, tree, b)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	r.logf("%s: explore (bugs %v, budget %s)", c.Tree, c.Bugs, r.Options.Budget)
	args := append([]string{"explore", "-f", src.scenarios, "--base", b.Base, "--seed", strconv.FormatUint(r.Options.Seed, 10),
		"--budget", r.Options.Budget.String(), "--sequences", strconv.Itoa(r.Options.Sequences),
		"--max-findings", strconv.Itoa(r.Options.MaxFindings), "--report", c.Report}, src.set...)
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
		c.Findings = append(c.Findings, r.replay(ctx, group, b, f))
	}
	return c
}

// treeRun is how runs on a tree are started: the folder of scenario
// files, and the --set flags that hand the trees to its Operator file.
type treeRun struct {
	scenarios string
	set       []string
}

// source makes the tree, and the bench's fixed trees, and returns how
// runs on it start; in a shard's pod, the tree made ready for it.
func (r *Runner) source(ctx context.Context, t Tree, b *Bench) (treeRun, error) {
	if r.Trees != nil {
		dir, ok := r.Trees[t.Key()]
		if !ok {
			return treeRun{}, fmt.Errorf("the source %s was not made ready for this shard", t.Key())
		}
		return treeRun{scenarios: dir}, nil
	}
	set, err := r.make(ctx, t, b)
	return treeRun{scenarios: b.Scenarios, set: set}, err
}

// make makes the tree, and the bench's fixed trees, and returns the
// --set flags that hand them to the Operator file.
func (r *Runner) make(ctx context.Context, t Tree, b *Bench) ([]string, error) {
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
func (r *Runner) replay(ctx context.Context, group []Bug, b *Bench, f report.Finding) Finding {
	out := Finding{Finding: f}
	out.OnBuggy = r.replayOn(ctx, group[0].Buggy(), b, f)
	if out.OnBuggy.Verdict == Fails {
		r.replayOnFixes(ctx, group, b, &out)
	}
	return out
}

// replayOnFixes runs the finding's scenario file on each fix of the
// group's bugs it has not run on yet.
func (r *Runner) replayOnFixes(ctx context.Context, group []Bug, b *Bench, f *Finding) {
	for _, bug := range group {
		fix, ok := bug.Fixed()
		if _, done := f.OnFixes[fix.Key()]; !ok || done {
			continue
		}
		if f.OnFixes == nil {
			f.OnFixes = map[string]Replay{}
		}
		tree := r.fixTree(ctx, fix, b)
		rep := r.replayOn(ctx, tree, b, f.Finding)
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
	if r.Trees != nil { // made ready as the fix, or as its whole tree
		if _, ok := r.Trees[fix.Key()]; ok {
			return fix
		}
		return fix.Whole()
	}
	_, err := r.Sources.Make(ctx, fix, b)
	if !errors.Is(err, errPickDoesNotApply) {
		return fix // made, or an error its replay reports
	}
	r.logf("%s: %v; replaying on %s instead", fix.Key(), err, fix.Whole().Key())
	return fix.Whole()
}

func (r *Runner) replayOn(ctx context.Context, t Tree, b *Bench, f report.Finding) Replay {
	src, err := r.source(ctx, t, b)
	if err != nil {
		return Replay{Error: err.Error()}
	}
	opFile, err := operatorFile(src.scenarios)
	if err != nil {
		return Replay{Error: err.Error()}
	}
	dir := filepath.Join(r.Out, "replays", f.Scenario+"-on-"+t.Key())
	args := append([]string{"run", "-f", opFile, "-f", f.File, "--seed", strconv.FormatUint(r.Options.Seed, 10),
		"--report", dir}, src.set...)
	if !r.Options.Kind {
		args = append(args, "--envtest")
	}
	rep := r.replayOnce(ctx, args, dir, f)
	if rep.setupFailed {
		// The environment's doing (an API server slow to start on cores
		// shared with other campaigns), not the tree's: once more.
		r.logf("%s on %s: %s; once more", f.Scenario, t.Key(), rep.Error)
		rep = r.replayOnce(ctx, args, dir, f)
	}
	r.logf("%s replayed on %s: %s in %s", f.Scenario, t.Key(), rep, rep.Took.Round(time.Second))
	return rep
}

// replayOnce runs a replay's command and judges it.
func (r *Runner) replayOnce(ctx context.Context, args []string, dir string, f report.Finding) Replay {
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
			rep.setupFailed = errors.Is(err, errSetupFailed)
		}
	default:
		rep.Error = fmt.Sprintf("gauntlet run exited %d (log: %s.log)", code, dir)
	}
	return rep
}

// errSetupFailed is judgeReplay's error for a replay that ran no
// scenario: its setup (envtest, the operator) failed.
var errSetupFailed = errors.New("the replay's setup failed")

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
	switch {
	case res == nil && rep.Setup != nil:
		return r, fmt.Errorf("%w at %s: %s (log: %s.log)", errSetupFailed, rep.Setup.Step, rep.Setup.Error, dir)
	case res == nil:
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
