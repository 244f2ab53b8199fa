package bugbench

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// Verdicts of a bug.
const (
	// Found: a finding failed on the buggy source and passed on the fix.
	Found = "found"
	// NoFix: the bug has no known fix, so no finding can be told to be
	// it; the campaign's findings no fix explains are listed.
	NoFix = "no fix known"
	// Unconfirmed: a finding failed on the buggy source and passed only on
	// the fix commit's whole tree, the fix's own change not applying to
	// the buggy commit: any change in between may explain it. Not counted.
	Unconfirmed = "unconfirmed"
	// NotFound: no finding the fix tells apart.
	NotFound = "not found"
	// NotRun: its operator has not come through the door.
	NotRun = "not run"
	// Error: the campaign could not run.
	Error = "error"
)

// Replay verdicts: it broke the finding's oracle, none, or another.
const (
	Fails  = "fails"
	Passes = "passes"
	Other  = "breaks another oracle"
)

// Result is a benchmark run: bugs.json.
type Result struct {
	Seed      uint64        `json:"seed"`
	Budget    string        `json:"budget"`
	Kind      bool          `json:"kind,omitempty"`
	Shards    int           `json:"shards,omitempty"`
	MultiNode bool          `json:"multiNode,omitempty"`
	Job       bool          `json:"job,omitempty"`
	Campaigns []Campaign    `json:"campaigns"`
	Bugs      []BugResult   `json:"bugs"`
	Totals    Totals        `json:"totals"`
	Took      time.Duration `json:"took"`
}

// Campaign is one explore campaign on a buggy source.
type Campaign struct {
	Tree string   `json:"tree"`
	Bugs []string `json:"bugs"`
	// LeftOut are the file's other bugs of the same source, which the run
	// did not select (--bug): one of them may explain a finding the
	// selected fixes do not, so no finding of the campaign is a false
	// alarm.
	LeftOut  []string      `json:"leftOut,omitempty"`
	Report   string        `json:"report"`
	Runs     int           `json:"runs"`
	Explored time.Duration `json:"explored"`
	Took     time.Duration `json:"took"`
	Findings []Finding     `json:"findings,omitempty"`
	Error    string        `json:"error,omitempty"`
	// Earlier holds, for each fix of the campaign's bugs (by tree key),
	// the other fixes that are its ancestors: a later fix holds the
	// earlier ones, and gets no credit for what they already fix.
	Earlier map[string][]string `json:"earlier,omitempty"`
}

// Finding is a campaign's finding, as explore.json holds it, and its
// replays.
type Finding struct {
	report.Finding
	OnBuggy Replay            `json:"onBuggy"`
	OnFixes map[string]Replay `json:"onFixes,omitempty"`
	// SameCauseAs names the finding of the same cause that was replayed
	// in its place ("" when this one was).
	SameCauseAs string `json:"sameCauseAs,omitempty"`
}

// Replay is a finding's scenario file run once on a source.
type Replay struct {
	// Verdict is Fails when the run broke the finding's oracle, Passes
	// when it broke none, Other when it broke another; Oracle names the
	// oracle it broke ("" for none).
	Verdict string `json:"verdict,omitempty"`
	Oracle  string `json:"oracle,omitempty"`
	// Broken lists every oracle the run broke, in the order it judged
	// them (Oracle first when it is no check: "settles", "runs").
	Broken []string `json:"broken,omitempty"`
	// Differences are where the end state differed from the twin's or a
	// fresh resource's (the paths), when the oracle compares end states.
	Differences []string      `json:"differences,omitempty"`
	Error       string        `json:"error,omitempty"`
	Report      string        `json:"report,omitempty"`
	Took        time.Duration `json:"took,omitempty"`
	// Tree is the tree replayed on when it is not the one asked for: a
	// fix commit's whole tree, its own change not applying to the buggy
	// commit. Such a verdict may come from any change in between.
	Tree string `json:"tree,omitempty"`

	setupFailed bool // the run ran no scenario: its setup failed
}

// broken is Broken, or Oracle alone for a replay recorded before
// replays listed every oracle.
func (r Replay) broken() []string {
	switch {
	case len(r.Broken) > 0:
		return r.Broken
	case r.Oracle != "":
		return []string{r.Oracle}
	}
	return nil
}

func (r Replay) String() string {
	var s string
	switch {
	case r.Error != "":
		s = "error: " + r.Error
	case r.Verdict == Other:
		s = "breaks " + r.Oracle + " instead"
	default:
		s = r.Verdict
	}
	if r.Tree != "" {
		s += " (on " + r.Tree + ": the fix's own change does not apply)"
	}
	return s
}

// BugResult is a bug's verdict and the finding that earned it.
type BugResult struct {
	Bug     Bug      `json:"bug"`
	Verdict string   `json:"verdict"`
	Finding *Finding `json:"finding,omitempty"`
	Why     string   `json:"why,omitempty"`
	// Minutes is the campaign time to the finding.
	Minutes float64 `json:"minutes,omitempty"`
}

// Totals count the verdicts, and the findings that no listed bug
// explains.
type Totals struct {
	Bugs     int `json:"bugs"`
	Found    int `json:"found"`
	NoFix    int `json:"noFix"`
	NotFound int `json:"notFound"`
	// Unconfirmed are bugs only a fix commit's whole tree tells apart.
	Unconfirmed int `json:"unconfirmed,omitempty"`
	NotRun      int `json:"notRun"`
	Errors      int `json:"errors"`
	// FalseAlarms are findings that fail on every fix of their campaign
	// when each of its bugs has one: nothing listed explains them.
	FalseAlarms int `json:"falseAlarms"`
	// Unattributed are findings that fail on the fixes known when some bug
	// of the campaign has none: that one, another bug, or a false alarm.
	Unattributed int `json:"unattributed"`
	// Irreproducible are findings whose file passed on the buggy source.
	Irreproducible int `json:"irreproducible"`
}

// judge gives each bug of a campaign its verdict (attribute).
func judge(group []Bug, c Campaign) []BugResult {
	var out []BugResult
	for _, bug := range group {
		r := attribute(bug, c)
		_, hasFix := bug.Fixed()
		switch {
		case c.Error != "":
			r.Verdict, r.Why = Error, c.Error
		case !hasFix:
			r.Verdict, r.Why = NoFix, "no finding can be told to be this bug; the campaign's unexplained findings are listed below the table"
		case r.Finding != nil:
			r.Minutes = r.Finding.After.Minutes()
		case len(c.Findings) == 0:
			r.Why = fmt.Sprintf("no finding in %d runs (%s)", c.Runs, c.Explored.Round(time.Second))
		default:
			r.Why = fmt.Sprintf("%d findings, none passes on the fix", len(c.Findings))
		}
		out = append(out, r)
	}
	return out
}

// attribute finds the finding that tells bug apart, strongest first: one
// that fails on its buggy source and passes on its fix; else one whose
// fix removes one of the oracles it broke or one of its differences (two
// faults of the operator shown at once, the rest staying); else one that
// passes only on the fix commit's whole tree (unconfirmed). A finding
// an earlier fix already explains is not this bug's.
func attribute(bug Bug, c Campaign) BugResult {
	r := BugResult{Bug: bug, Verdict: NotFound}
	fix, hasFix := bug.Fixed()
	if !hasFix {
		return r
	}
	var partial, unconfirmed *Finding
	var gone []string
	for i := range c.Findings {
		f := &c.Findings[i]
		if f.OnBuggy.Verdict != Fails || fixedEarlier(*f, fix.Key(), c.Earlier[fix.Key()]) {
			continue
		}
		switch onFix := f.OnFixes[fix.Key()]; {
		case onFix.Tree != "":
			if unconfirmed == nil && explainedOn(f.OnBuggy, onFix) {
				unconfirmed = f
			}
		case onFix.Verdict == Passes:
			r.Verdict, r.Finding = Found, f
			return r
		case partial == nil:
			if g := removed(f.OnBuggy, onFix); len(g) > 0 {
				partial, gone = f, g
			}
		}
	}
	switch {
	case partial != nil:
		r.Verdict, r.Finding = Found, partial
		r.Why = "the fix removes " + strings.Join(gone, ", ") + "; the rest of the finding stays"
	case unconfirmed != nil:
		r.Verdict, r.Finding = Unconfirmed, unconfirmed
		r.Why = "it passes only on the fix commit's tree (" + unconfirmed.OnFixes[fix.Key()].Tree +
			"), the fix's own change not applying to the buggy commit: any change in between may explain it"
	}
	return r
}

func total(res *Result) Totals {
	t := Totals{Bugs: len(res.Bugs)}
	for _, b := range res.Bugs {
		switch b.Verdict {
		case Found:
			t.Found++
		case NoFix:
			t.NoFix++
		case NotFound:
			t.NotFound++
		case Unconfirmed:
			t.Unconfirmed++
		case NotRun:
			t.NotRun++
		case Error:
			t.Errors++
		}
	}
	for _, c := range res.Campaigns {
		allFixed := len(c.LeftOut) == 0
		for _, b := range res.Bugs {
			if _, ok := b.Bug.Fixed(); !ok && slices.Contains(c.Bugs, b.Bug.ID) {
				allFixed = false
			}
		}
		for _, f := range c.Findings {
			switch {
			case f.SameCauseAs != "":
			case f.OnBuggy.Verdict != Fails:
				t.Irreproducible++
			case explained(f):
			case allFixed && len(f.OnFixes) > 0:
				t.FalseAlarms++
			default:
				t.Unattributed++
			}
		}
	}
	return t
}

// explained says some fix explains the finding.
func explained(f Finding) bool {
	for _, r := range f.OnFixes {
		if explainedOn(f.OnBuggy, r) {
			return true
		}
	}
	return false
}

// explainedOn says the replay on a fix passes, or removes part of what
// the buggy source's replay showed.
func explainedOn(buggy, fix Replay) bool {
	return fix.Verdict == Passes || len(removed(buggy, fix)) > 0
}

// fixedEarlier says an earlier fix already explains the finding as much
// as this one does: the credit is the earlier fix's bug's.
func fixedEarlier(f Finding, fix string, earlier []string) bool {
	mine := removed(f.OnBuggy, f.OnFixes[fix])
	for _, e := range earlier {
		prev := f.OnFixes[e]
		if gone := removed(f.OnBuggy, prev); prev.Verdict == Passes || len(gone) > 0 && slices.Equal(gone, mine) {
			return true
		}
	}
	return false
}

// removed is the part of the buggy source's failure that is gone on the
// fix: the oracles it broke that hold there, and the end-state
// differences gone. It is nil when the fix breaks anything the buggy
// source did not (an oracle or a difference of its own), when nothing is
// gone, or when every difference is gone yet the same oracles break (not
// a failure by differences).
func removed(buggy, fix Replay) []string {
	if fix.Verdict != Fails && fix.Verdict != Other {
		return nil
	}
	was, is := buggy.broken(), fix.broken()
	var gone []string
	for _, o := range was {
		if !slices.Contains(is, o) {
			gone = append(gone, "the "+o+" violation")
		}
	}
	for _, o := range is {
		if !slices.Contains(was, o) {
			return nil
		}
	}
	oracles := len(gone)
	for _, d := range buggy.Differences {
		if !slices.Contains(fix.Differences, d) {
			gone = append(gone, d)
		}
	}
	for _, d := range fix.Differences {
		if !slices.Contains(buggy.Differences, d) {
			return nil
		}
	}
	if oracles == 0 && len(gone) == len(buggy.Differences) {
		return nil
	}
	return gone
}

// ReadResult reads a run's dir/bugs.json.
func ReadResult(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "bugs.json"))
	if err != nil {
		return nil, err
	}
	res := &Result{}
	return res, json.Unmarshal(b, res)
}

// Write writes dir/bugs.json and bugs.md.
func (res *Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bugs.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bugs.md"), []byte(res.Markdown()), 0o644)
}

// Markdown is the result as a table, one row a bug, then the totals.
func (res *Result) Markdown() string {
	var b strings.Builder
	b.WriteString("| bug | operator | class | found by | fix | verdict | oracle | fault layer | run | minutes | replay: buggy / fix | scenario file |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Bugs {
		oracle, layer, run, minutes, replay, file := "-", "-", "-", "-", "-", "-"
		if f := r.Finding; f != nil {
			oracle, layer, run = f.Oracle, Layer(f.FaultAction, !res.Kind), fmt.Sprint(f.Run)
			minutes, file = fmt.Sprintf("%.1f", r.Minutes), f.File
			replay = f.OnBuggy.String() + " / -"
			if fix, ok := r.Bug.Fixed(); ok {
				replay = f.OnBuggy.String() + " / " + f.OnFixes[fix.Key()].String()
			}
		}
		verdict := r.Verdict
		if r.Why != "" {
			verdict += ": " + r.Why
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Bug.ID, r.Bug.Operator, r.Bug.Class, cell(r.Bug.anchor()),
			cell(r.Bug.fixName()), cell(verdict), cell(oracle), cell(layer), run, minutes, cell(replay), cell(file))
	}
	t := res.Totals
	fmt.Fprintf(&b, "\n%d bugs: %d found, %d unconfirmed, %d with no fix known, %d not found, %d not run, %d errors; findings: %d false alarms, %d unattributed, %d irreproducible. Seed %d, budget %s a campaign, campaigns: %d, in %s.\n",
		t.Bugs, t.Found, t.Unconfirmed, t.NoFix, t.NotFound, t.NotRun, t.Errors, t.FalseAlarms, t.Unattributed, t.Irreproducible,
		res.Seed, res.Budget, len(res.Campaigns), res.Took.Round(time.Second))
	replays := map[bool]string{true: "on kind", false: "on envtest"}[res.Kind]
	if res.Job {
		replays = "on envtest in their campaign's pod"
	}
	fmt.Fprintf(&b, "Campaigns %s; replays %s.\n", res.campaignsOn(), replays)
	for _, c := range res.Campaigns {
		for _, f := range c.Findings {
			if f.SameCauseAs == "" && !explained(f) {
				fmt.Fprintf(&b, "- %s, %s (%s): on the buggy source %s; on the fixes %s; %s\n", c.Tree, f.Scenario, f.Oracle,
					f.OnBuggy, fixVerdicts(f.OnFixes), f.File)
			}
		}
	}
	return b.String()
}

// fixName says which fix a bug is judged on: the upstream commit, ours
// (a fix patch), the tree without the bug's patch, or none.
func (b Bug) fixName() string {
	switch {
	case b.FixCommit != nil && *b.FixCommit != "":
		return shortCommit(*b.FixCommit)
	case b.FixPatch != "":
		return "ours: " + filepath.Base(b.FixPatch)
	case b.BuggyPatch != "":
		return "without the patch"
	}
	return "-"
}

func shortCommit(c string) string { return c[:min(len(c), 8)] }

// anchor says which tool published the bug, with its oracles: the
// anchors' own result beside ours.
func (b Bug) anchor() string {
	if b.Source == "" {
		return "-"
	}
	if len(b.Oracle) == 0 {
		return b.Source
	}
	return b.Source + " (" + strings.Join(b.Oracle, ", ") + ")"
}

func fixVerdicts(m map[string]Replay) string {
	if len(m) == 0 {
		return "none known"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+m[k].String())
	}
	return strings.Join(parts, ", ")
}

func cell(s string) string {
	return strings.NewReplacer("|", "/", "\n", " ").Replace(s)
}

// campaignsOn says where the campaigns ran.
func (res *Result) campaignsOn() string {
	switch {
	case res.Job && res.MultiNode:
		return "side by side, one shard of an Indexed Job each (on envtest in its pod), on the multi-node kind cluster"
	case res.Job:
		return "side by side, one shard of an Indexed Job each (on envtest in its pod), on a cluster"
	case res.Shards > 0 && res.MultiNode:
		return fmt.Sprintf("as %d shards of an Indexed Job each, on the multi-node kind cluster", res.Shards)
	case res.Shards > 0:
		return fmt.Sprintf("as %d shards of an Indexed Job each, on a one-node kind cluster", res.Shards)
	case res.Kind:
		return "on kind"
	}
	return "on envtest"
}
