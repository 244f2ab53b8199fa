package bugbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// repo makes a repository with two commits of op/main.go ("v1", then
// "v2") and a patch that turns v2 into "bug"; the working tree holds an
// uncommitted "v3".
func repo(t *testing.T) (dir, c1, c2, patch string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q")
	write(t, filepath.Join(dir, "op/main.go"), "v1\n")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "one")
	c1 = git(t, dir, "rev-parse", "HEAD")
	write(t, filepath.Join(dir, "op/main.go"), "v2\n")
	git(t, dir, "commit", "-qam", "two")
	c2 = git(t, dir, "rev-parse", "HEAD")
	write(t, filepath.Join(dir, "op/main.go"), "bug\n")
	patch = filepath.Join(t.TempDir(), "bug.patch")
	write(t, patch, "The header is not part of the diff.\n\n"+git(t, dir, "diff")+"\n")
	write(t, filepath.Join(dir, "op/main.go"), "v3\n")
	write(t, filepath.Join(dir, "op/new.go"), "untracked\n")
	return dir, c1, c2, patch
}

func TestSourcesMakeCommitsWorkTreeAndPatch(t *testing.T) {
	dir, c1, c2, patch := repo(t)
	s := &Sources{Dir: t.TempDir()}
	b := &Bench{Repo: dir}
	for _, tc := range []struct {
		tree Tree
		want string
	}{
		{Tree{Operator: "o/p", Commit: c1}, "v1\n"},
		{Tree{Operator: "o/p", Commit: c2, Patch: patch}, "bug\n"},
		{Tree{Operator: "o/p"}, "v3\n"},
	} {
		got, err := s.Make(t.Context(), tc.tree, b)
		if err != nil {
			t.Fatalf("%s: %v", tc.tree.Key(), err)
		}
		text, err := os.ReadFile(filepath.Join(got, "op/main.go"))
		if err != nil || string(text) != tc.want {
			t.Errorf("%s: op/main.go = %q, %v; want %q", tc.tree.Key(), text, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Dir, Tree{Operator: "o/p"}.Key(), "op/new.go")); err != nil {
		t.Errorf("the working tree's untracked file was not copied: %v", err)
	}
	if _, err := s.Make(t.Context(), Tree{Operator: "o/p", Commit: "0123456789abcdef"}, b); err == nil || !strings.Contains(err.Error(), "0123456789abcdef") {
		t.Errorf("a commit the repository lacks: got %v, want an error naming it", err)
	}
}

// A fix commit is replayed as its own change on the buggy commit; where
// that change does not apply, on the fix commit's whole tree, and the
// replay says so.
func TestFixTreeIsTheFixOwnChange(t *testing.T) {
	dir, c1, c2, _ := repo(t)
	git(t, dir, "commit", "-qam", "three") // v2 -> v3: does not apply to v1
	c3 := git(t, dir, "rev-parse", "HEAD")
	b := &Bench{Repo: dir}
	r := &Runner{Sources: &Sources{Dir: t.TempDir()}}

	own := Tree{Operator: "o/p", Commit: c1, Pick: c2}
	if got := r.fixTree(t.Context(), own, b); got != own {
		t.Errorf("fixTree = %+v, want the change on the buggy commit", got)
	}
	src, err := r.Sources.Make(t.Context(), own, b)
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := os.ReadFile(filepath.Join(src, "op/main.go")); string(text) != "v2\n" {
		t.Errorf("op/main.go = %q after the pick, want v2", text)
	}

	far := Tree{Operator: "o/p", Commit: c1, Pick: c3}
	_, err = r.Sources.Make(t.Context(), far, b)
	if !errors.Is(err, errPickDoesNotApply) || !strings.Contains(err.Error(), c3) {
		t.Errorf("Make of a change that does not apply: %v", err)
	}
	if got := r.fixTree(t.Context(), far, b); got != (Tree{Operator: "o/p", Commit: c3}) {
		t.Errorf("fixTree = %+v, want the fix commit's whole tree", got)
	}
	rep := Replay{Verdict: Passes, Tree: far.Whole().Key()}
	if got := rep.String(); !strings.Contains(got, "passes (on o-p-"+c3[:8]+": the fix's own change does not apply)") {
		t.Errorf("Replay.String() = %q", got)
	}
}

func TestLoadChecksAndResolves(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.patch"), "x")
	write(t, filepath.Join(dir, "ok.yaml"), `
operators:
  - operator: o/p
    bench: {scenarios: sc, base: b, repo: ../r}
    kind: {scenarios: sc-kind, base: kb, repo: ../r, images: [./images.sh]}
bugs:
  - {id: a, operator: o/p, class: c, buggyPatch: p.patch, fixCommit: null}
  - {id: b, operator: o/p, class: c, buggyCommit: abc, fixCommit: def}
  - {id: c, operator: o/p, class: c, buggyCommit: abc, fixCommit: null}
  - {id: d, operator: o/p, class: c, buggyCommit: abc, fixCommit: null, fixPatch: p.patch}
`)
	f, err := Load(filepath.Join(dir, "ok.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b := f.Operators[0].Bench
	if b.Scenarios != filepath.Join(dir, "sc") || b.Repo != filepath.Join(filepath.Dir(dir), "r") || b.Variable != "OPERATOR_SOURCE" {
		t.Errorf("bench = %+v: paths not resolved against the file's folder, or no default variable", b)
	}
	if k := f.Bench(f.Bugs[0], true); k.Scenarios != filepath.Join(dir, "sc-kind") || k.Base != "kb" || k.Variable != "OPERATOR_SOURCE" {
		t.Errorf("on kind, bench = %+v; want the kind stanza, resolved", k)
	}
	if f.Bench(f.Bugs[0], false) != b {
		t.Error("on envtest, the bench stanza is not the one used")
	}
	if fix, ok := f.Bugs[0].Fixed(); !ok || fix.Patch != "" || fix.Commit != "" {
		t.Errorf("a patch's fix = %+v, %v; want the tree without the patch", fix, ok)
	}
	if fix, ok := f.Bugs[1].Fixed(); !ok || fix.Commit != "abc" || fix.Pick != "def" {
		t.Errorf("fixCommit's fix = %+v, %v; want the fix commit's own change on the buggy commit", fix, ok)
	}
	if _, ok := f.Bugs[2].Fixed(); ok {
		t.Error("a bug with no fix commit and no patch has a fix")
	}
	if fix, ok := f.Bugs[3].Fixed(); !ok || fix.Commit != "abc" || fix.Patch != filepath.Join(dir, "p.patch") {
		t.Errorf("a fix patch's fix = %+v, %v; want the buggy commit with the patch", fix, ok)
	}
	for name, text := range map[string]string{
		"unknown field":     "bugs:\n  - {id: a, operator: o/p, class: c, fixcommit: x}\n",
		"unknown operator":  "bugs:\n  - {id: a, operator: o/q, class: c, fixCommit: null}\n",
		"missing patch":     "operators: [{operator: o/p}]\nbugs:\n  - {id: a, operator: o/p, class: c, buggyPatch: no.patch, fixCommit: null}\n",
		"missing fix patch": "operators: [{operator: o/p}]\nbugs:\n  - {id: a, operator: o/p, class: c, buggyCommit: abc, fixCommit: null, fixPatch: no.patch}\n",
		"two fixes":         "operators: [{operator: o/p}]\nbugs:\n  - {id: a, operator: o/p, class: c, buggyCommit: abc, fixCommit: def, fixPatch: p.patch}\n",
		"duplicate id":      "operators: [{operator: o/p}]\nbugs:\n  - {id: a, operator: o/p, class: c, fixCommit: null}\n  - {id: a, operator: o/p, class: c, fixCommit: null}\n",
		"kind without base": "operators: [{operator: o/p, kind: {scenarios: s, repo: r}}]\nbugs: []\n",
	} {
		write(t, filepath.Join(dir, "bad.yaml"), text)
		if _, err := Load(filepath.Join(dir, "bad.yaml")); err == nil {
			t.Errorf("%s: loaded without an error", name)
		}
	}
}

// fakeGauntlet plays gauntlet: explore writes the findings given for the
// tree it is pointed at; run fails where fails says a file fails.
type fakeGauntlet struct {
	findings map[string][]report.Finding // by the tree's folder name
	fails    map[string]failed           // by "<finding file> on <tree folder>"
	fixed    string                      // the folder the bench's tree FIXED is made in, for sources older than it
	calls    []string
	args     [][]string // every call's arguments
	// setupFails counts, by "<finding file> on <tree folder>", the runs
	// left whose setup fails (no scenario runs).
	setupFails map[string]int
}

func (g *fakeGauntlet) run(_ context.Context, args []string, _ string) (int, error) {
	g.args = append(g.args, slices.Clone(args))
	arg := func(flag string) string {
		i := slices.Index(args, flag)
		return args[i+1]
	}
	_, src, _ := strings.Cut(arg("--set"), "=")
	if i := slices.Index(args, "--set"); args[i+3] != "FIXED="+filepath.Join(filepath.Dir(src), g.fixed) && args[i+3] != "FIXED="+src {
		return 0, fmt.Errorf("no fixed tree after %v", args)
	}
	tree := filepath.Base(src)
	call := args[0] + " " + tree
	if args[0] == "run" {
		call += " " + args[slices.Index(args, "-f")+3]
	}
	g.calls = append(g.calls, call)
	if args[0] == "explore" {
		x := report.Campaign{Runs: 7, Took: 3 * time.Minute, Findings: g.findings[tree]}
		if err := os.MkdirAll(arg("--report"), 0o755); err != nil {
			return 0, err
		}
		if err := x.Save(arg("--report")); err != nil {
			return 0, err
		}
		return min(len(x.Findings), 1), nil
	}
	file := args[slices.Index(args, "-f")+3]
	if g.setupFails[file+" on "+tree] > 0 {
		g.setupFails[file+" on "+tree]--
		rep := report.NewReport(1, "envtest")
		rep.Setup = &report.SetupFailure{Step: "setup", Error: "timeout waiting for process kube-apiserver to start"}
		return 1, rep.Write(arg("--report"))
	}
	res, ok := g.fails[file+" on "+tree]
	if !ok {
		return 0, nil
	}
	rep := report.NewReport(1, "envtest")
	res.Run = &report.Run{Scenario: strings.TrimSuffix(filepath.Base(file), ".yaml"), Errors: res.Errors}
	rep.Results = []*report.Result{&res.Result}
	return 1, rep.Write(arg("--report"))
}

// failed is a replay's result that breaks an oracle: "settles" (it did
// not converge; conds are its conditions then) or a check's.
type failed struct {
	report.Result
	Errors []string
}

func settles(conds ...report.Condition) failed {
	return failed{Result: report.Result{Conditions: conds}, Errors: []string{"waiting for db to converge: gave up after 2m0s"}}
}

func broke(kind, name string) failed {
	c := report.Check{Kind: kind, Name: name, Violation: "broken"}
	return failed{Result: report.Result{Checks: []report.Check{c}, Violations: []string{c.Violation}}}
}

// benchFixture is a runner over a file of four bugs, two buggy sources
// and a fake gauntlet whose findings and replays say what each is.
func benchFixture(t *testing.T) (r *Runner, g *fakeGauntlet, f *File, c1 string) {
	t.Helper()
	dir, c1, c2, _ := repo(t)
	sc := t.TempDir()
	write(t, filepath.Join(sc, "operator.yaml"), "apiVersion: gauntlet.dev/v1alpha1\nkind: Operator\nmetadata: {name: o}\nspec:\n  namespace: ns\n  selector: {a: b}\n  manifests: [m.yaml]\n")
	f = &File{
		Operators: []Operator{{Operator: "o/p", Bench: &Bench{Scenarios: sc, Base: "b", Repo: dir, Variable: "SRC", Trees: map[string]string{"FIXED": c1}}}, {Operator: "o/q"}},
		Bugs: []Bug{
			{ID: "found", Operator: "o/p", BuggyCommit: c1, FixCommit: &c2},
			{ID: "no-fix", Operator: "o/p", BuggyCommit: c1},
			{ID: "quiet", Operator: "o/p", BuggyCommit: c2, FixCommit: &c1},
			{ID: "no-door", Operator: "o/q", BuggyCommit: c1},
		},
	}
	buggy, fixed := Tree{Operator: "o/p", Commit: c1}.Key(), Tree{Operator: "o/p", Commit: c1, Pick: c2}.Key()
	g = &fakeGauntlet{
		fixed: buggy,
		findings: map[string][]report.Finding{buggy: {
			{Scenario: "explore-2", Oracle: "settles", Fields: []string{"spec.a"}, File: "/f/explore-2.yaml", After: 90 * time.Second, Run: 2},
			{Scenario: "explore-5", Oracle: "differential: end state", FaultAction: "stale-view", File: "/f/explore-5.yaml", Run: 5},
			{Scenario: "explore-6", Oracle: "settles", Shrunk: []string{"spec.a=1"}, File: "/f/explore-6.yaml", Run: 6},
			{Scenario: "explore-7", Oracle: "settles", File: "/f/explore-7.yaml", Run: 7},
		}},
		fails: map[string]failed{
			"/f/explore-2.yaml on " + buggy: settles(),
			// On the fix it does not settle either, but says why, naming
			// the field the step set: refused, as explore judges it.
			"/f/explore-2.yaml on " + fixed: settles(report.Condition{Type: "Progressing", Status: "False", Message: "spec.a must be even"}),
			"/f/explore-5.yaml on " + buggy: broke("differential", "end state"), "/f/explore-5.yaml on " + fixed: broke("differential", "end state"),
			// Another oracle broken on the buggy source: not this finding.
			"/f/explore-6.yaml on " + buggy: broke("twin", "writes"),
			// Another oracle broken on the fix: it tells nothing.
			"/f/explore-6.yaml on " + fixed: broke("twin", "writes"),
		},
	}
	r = &Runner{File: f, Options: Options{Seed: 1, Budget: time.Minute}, Gauntlet: g.run, Out: t.TempDir(),
		Sources: &Sources{Dir: t.TempDir()}}
	return r, g, f, c1
}

func TestRunnerJudgesByReplayOnTheFix(t *testing.T) {
	r, g, f, _ := benchFixture(t)
	res, err := r.Run(t.Context(), f.Bugs)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]string{}
	for _, b := range res.Bugs {
		verdicts[b.Bug.ID] = b.Verdict
	}
	want := map[string]string{"found": Found, "no-fix": NoFix, "quiet": NotFound, "no-door": NotRun}
	for id, v := range want {
		if verdicts[id] != v {
			t.Errorf("%s: verdict %q, want %q (calls %v)", id, verdicts[id], v, g.calls)
		}
	}
	if b := res.Bugs[0]; b.Finding == nil || b.Finding.Scenario != "explore-2" || b.Minutes != 1.5 {
		t.Errorf("found by %+v after %v min; want explore-2 after 1.5", b.Finding, b.Minutes)
	}
	// explore-5 fails on the fix too, and no-fix has none: unattributed;
	// explore-6 passes on the buggy source: irreproducible.
	if got := res.Totals; got.Found != 1 || got.Unattributed != 1 || got.Irreproducible != 1 || got.FalseAlarms != 0 || got.NotRun != 1 {
		t.Errorf("totals %+v", got)
	}
	if slices.ContainsFunc(g.calls, func(c string) bool { return strings.Contains(c, "explore-7") }) {
		t.Errorf("explore-7, of explore-2's cause, was replayed: %v", g.calls)
	}
	if n := len(slices.DeleteFunc(slices.Clone(g.calls), func(c string) bool { return !strings.Contains(c, "explore-6") })); n != 1 {
		t.Errorf("explore-6, which passes on its buggy source, was replayed %d times, want once (not on the fixes): %v", n, g.calls)
	}
	if n := strings.Count(strings.Join(g.calls, "\n"), "explore "); n != 2 {
		t.Errorf("%d campaigns for two buggy sources: %v", n, g.calls)
	}
	judgedAgain(t, r.Out, res)
}

// A run of some bugs (--bug) names the others of the same source, which
// may explain a finding: none of its findings is a false alarm.
func TestRunnerOfSomeBugsNamesTheOthers(t *testing.T) {
	r, _, f, _ := benchFixture(t)
	res, err := r.Run(t.Context(), f.Bugs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Campaigns[0].LeftOut; !slices.Equal(got, []string{"no-fix"}) {
		t.Errorf("left out %v, want [no-fix] (no-door is another operator's)", got)
	}
	if got := res.Totals; got.Found != 1 || got.FalseAlarms != 0 || got.Unattributed != 1 {
		t.Errorf("totals %+v: explore-5, failing on the fix, is unattributed, not a false alarm", got)
	}
	// A run recorded before the field existed, brought up to the file.
	res.Campaigns[0].LeftOut = nil
	if err := r.Update(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	if got := res.Campaigns[0].LeftOut; !slices.Equal(got, []string{"no-fix"}) {
		t.Errorf("brought up to the file: left out %v, want [no-fix]", got)
	}
}

// With shards, each campaign is spread over an Indexed Job on the
// multi-node kind cluster; the replays stay on envtest here.
func TestShardsGoToTheCampaignsOnly(t *testing.T) {
	r, g, f, _ := benchFixture(t)
	r.Options.Shards, r.Options.MultiNode = 3, true
	res, err := r.Run(t.Context(), f.Bugs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Shards != 3 || !res.MultiNode {
		t.Errorf("bugs.json says shards %d, multi-node %v", res.Shards, res.MultiNode)
	}
	campaigns := 0
	for _, args := range g.args {
		sharded := slices.Contains(args, "--kind") && slices.Contains(args, "--shards") && args[slices.Index(args, "--shards")+1] == "3" && slices.Contains(args, "--multi-node")
		switch {
		case args[0] == "explore" && !sharded:
			t.Errorf("a campaign without its shards: %v", args)
		case args[0] == "explore":
			campaigns++
		case slices.Contains(args, "--shards") || slices.Contains(args, "--multi-node") || slices.Contains(args, "--kind"):
			t.Errorf("a replay with shards: %v", args)
		}
	}
	if campaigns != 2 {
		t.Errorf("%d sharded campaigns, want 2: %v", campaigns, g.calls)
	}
}

// A fix written since for no-fix: the recorded run brought up to the file
// replays on it the findings that failed on the buggy source, nothing
// else, and no-fix is found.
func TestAFixWrittenSinceIsReplayedOnTheRecordedFindings(t *testing.T) {
	r, g, f, c1 := benchFixture(t)
	res, err := r.Run(t.Context(), f.Bugs)
	if err != nil {
		t.Fatal(err)
	}
	fixPatch := filepath.Join(t.TempDir(), "fix.patch")
	write(t, fixPatch, "diff --git a/op/main.go b/op/main.go\n--- a/op/main.go\n+++ b/op/main.go\n@@ -1 +1 @@\n-v1\n+fixed\n")
	f.Bugs[1].FixPatch = fixPatch
	g.calls = nil
	if err := r.Update(t.Context(), res); err != nil {
		t.Fatal(err)
	}
	if err := Rejudge(res); err != nil {
		t.Fatal(err)
	}
	patched := Tree{Operator: "o/p", Commit: c1, Patch: fixPatch}.Key()
	if want := []string{"run " + patched + " /f/explore-2.yaml", "run " + patched + " /f/explore-5.yaml"}; !slices.Equal(g.calls, want) {
		t.Errorf("replays after the fix patch: %v, want %v", g.calls, want)
	}
	if got := res.Bugs[1]; got.Bug.ID != "no-fix" || got.Verdict != Found {
		t.Errorf("after its fix patch: %s %q, want no-fix found", got.Bug.ID, got.Verdict)
	}
	if md := res.Markdown(); !strings.Contains(md, "| no-fix | o/p |  | - | ours: fix.patch | found |") {
		t.Errorf("bugs.md does not name the fix patch as ours:\n%s", md)
	}
}

// judgedAgain reads a run's results back, judges its replays again from
// their reports and wants the same totals, then checks bugs.md.
func judgedAgain(t *testing.T, out string, res *Result) {
	t.Helper()
	// Judged again from the replays' reports, read back: the same verdicts.
	again, err := ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.Bugs { // as a run judged otherwise left them
		if again.Bugs[i].Verdict != NotRun {
			again.Bugs[i].Verdict = NotFound
		}
	}
	again.Totals = Totals{}
	if err := Rejudge(again); err != nil {
		t.Fatal(err)
	}
	if again.Totals != res.Totals {
		t.Errorf("judged again: totals %+v, want %+v", again.Totals, res.Totals)
	}
	b, err := os.ReadFile(filepath.Join(out, "bugs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || len(back.Bugs) != 4 {
		t.Errorf("bugs.json: %v, %d bugs", err, len(back.Bugs))
	}
	md := res.Markdown()
	fixed := shortCommit(*res.Bugs[0].Bug.FixCommit)
	for _, s := range []string{"| found | o/p |  | - | " + fixed + " | found |", "| no-fix | o/p |  | - | - | no fix known", "none (spec changes alone)", "4 bugs: 1 found, 0 unconfirmed, 1 with no fix known, 1 not found, 1 not run"} {
		if !strings.Contains(md, s) {
			t.Errorf("bugs.md lacks %q:\n%s", s, md)
		}
	}
}

// A pod kill is Chaos Mesh's on a cluster and the simulated pods' on
// envtest.
func TestLayer(t *testing.T) {
	for _, c := range []struct {
		action  string
		envtest bool
		want    string
	}{
		{"", true, "none (spec changes alone)"},
		{"stale-view", true, "operator's view (API proxy): stale-view"},
		{"pod-kill", true, "envtest's simulated pods: pod-kill, made again at the heal"},
		{"pod-kill", false, "cluster (Chaos Mesh): pod-kill"},
		{"partition", false, "cluster (Chaos Mesh): partition"},
	} {
		if got := Layer(c.action, c.envtest); got != c.want {
			t.Errorf("Layer(%q, %v) = %q, want %q", c.action, c.envtest, got, c.want)
		}
	}
}

func TestFieldsOfShrunkSteps(t *testing.T) {
	got := fieldsOf([]string{"spec.restoreFrom.s3.region=aaaaaaaa…(64 characters) (in a new spec.restoreFrom) at creation", "spec.image back as it was", "spec.replicas=5"})
	want := []string{"spec.restoreFrom.s3.region", "spec.restoreFrom", "spec.image", "spec.replicas"}
	if !slices.Equal(got, want) {
		t.Errorf("fieldsOf = %v, want %v", got, want)
	}
}
