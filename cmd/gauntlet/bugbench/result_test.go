package bugbench

import (
	"strings"
	"testing"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// A fix on which the replay breaks another oracle tells nothing of the
// bug: it is not found by that finding.
func TestAnotherOracleOnTheFixIsNoPass(t *testing.T) {
	fixCommit := "f"
	bug := Bug{ID: "b", Operator: "o/p", BuggyCommit: "a", FixCommit: &fixCommit}
	fix, _ := bug.Fixed()
	c := Campaign{Bugs: []string{"b"}, Findings: []Finding{{Finding: report.Finding{Scenario: "explore-1", Oracle: "differential"},
		OnBuggy: Replay{Verdict: Fails}, OnFixes: map[string]Replay{fix.Key(): {Verdict: Other, Oracle: "settles"}}}}}
	if got := judge([]Bug{bug}, c); got[0].Verdict != NotFound {
		t.Errorf("verdict %q, want %q", got[0].Verdict, NotFound)
	}
	c.Findings[0].OnFixes[fix.Key()] = Replay{Verdict: Passes}
	if got := judge([]Bug{bug}, c); got[0].Verdict != Found {
		t.Errorf("verdict %q once the fix passes, want %q", got[0].Verdict, Found)
	}
}

// A finding that shows two faults at once is found for the bug whose fix
// removes its part, the rest staying.
func TestAFixThatRemovesPartOfAFinding(t *testing.T) {
	fixCommit := "f"
	bug := Bug{ID: "b", Operator: "o/p", BuggyCommit: "a", FixCommit: &fixCommit}
	fix, _ := bug.Fixed()
	both := []string{"ConfigMap/c.data.cfg", "PersistentVolumeClaim/d.deleting"}
	c := Campaign{Bugs: []string{"b"}, Findings: []Finding{{Finding: report.Finding{Scenario: "explore-5", Oracle: "twin: end state"},
		OnBuggy: Replay{Verdict: Fails, Differences: both},
		OnFixes: map[string]Replay{fix.Key(): {Verdict: Fails, Differences: both[:1]}}}}}
	got := judge([]Bug{bug}, c)[0]
	if got.Verdict != Found || !strings.Contains(got.Why, "PersistentVolumeClaim/d.deleting") {
		t.Errorf("verdict %q (%s), want found, the claim's difference removed", got.Verdict, got.Why)
	}
	for name, onFix := range map[string][]string{
		"the same differences":       both,
		"a difference of its own":    {"ConfigMap/c.data.cfg", "Service/s.spec"},
		"none, yet the oracle broke": nil,
	} {
		c.Findings[0].OnFixes[fix.Key()] = Replay{Verdict: Fails, Differences: onFix}
		if got := judge([]Bug{bug}, c)[0]; got.Verdict != NotFound {
			t.Errorf("%s on the fix: verdict %q, want %q", name, got.Verdict, NotFound)
		}
	}
}

// A finding that breaks two oracles at once is found for the bug whose
// fix makes one of them hold, when the fix breaks nothing the buggy
// source did not: a stale view that deletes a new cluster's StatefulSet
// also leaves children taken over from the old one, which the fix keeps.
func TestAFixThatRemovesAnOracleOfAFinding(t *testing.T) {
	fixCommit := "f"
	bug := Bug{ID: "b", Operator: "o/p", BuggyCommit: "a", FixCommit: &fixCommit}
	fix, _ := bug.Fixed()
	const deletes, state = "twin: operator deletes only what the twin deletes", "twin: end state equals the fault-free twin's"
	taken := []string{"Service/rmq.predatesResource"}
	c := Campaign{Bugs: []string{"b"}, Findings: []Finding{{Finding: report.Finding{Scenario: "explore-9", Oracle: deletes},
		OnBuggy: Replay{Verdict: Fails, Oracle: deletes, Broken: []string{deletes, state}, Differences: taken},
		OnFixes: map[string]Replay{fix.Key(): {Verdict: Other, Oracle: state, Broken: []string{state}, Differences: taken}}}}}
	got := judge([]Bug{bug}, c)[0]
	if got.Verdict != Found || !strings.Contains(got.Why, "the "+deletes+" violation") {
		t.Errorf("verdict %q (%s), want found, the deletes removed", got.Verdict, got.Why)
	}
	for name, onFix := range map[string]Replay{
		"an oracle of its own":     {Verdict: Other, Oracle: "settles", Broken: []string{"settles", state}, Differences: taken},
		"a difference of its own":  {Verdict: Other, Oracle: state, Broken: []string{state}, Differences: append([]string{"Service/rmq.spec"}, taken...)},
		"the same oracles broken":  {Verdict: Fails, Oracle: deletes, Broken: []string{deletes, state}, Differences: taken},
		"recorded before, no list": {Verdict: Other, Oracle: state, Differences: taken},
	} {
		if name == "recorded before, no list" {
			c.Findings[0].OnBuggy.Broken = nil // the buggy run as recorded then: its first oracle only
		}
		c.Findings[0].OnFixes[fix.Key()] = onFix
		if got := judge([]Bug{bug}, c)[0]; got.Verdict != NotFound {
			t.Errorf("%s on the fix: verdict %q (%s), want %q", name, got.Verdict, got.Why, NotFound)
		}
	}
}

// A finding that passes on the fix tells the bug apart better than an
// earlier one whose fix only removes part of it, which may be another
// fault's: the clean pass is the one named.
func TestACleanPassOutranksAPartOne(t *testing.T) {
	fixCommit := "f"
	bug := Bug{ID: "b", Operator: "o/p", BuggyCommit: "a", FixCommit: &fixCommit}
	fix, _ := bug.Fixed()
	const effect, errs = "effect: spec changes show", "operator: reconcile errors once converged"
	partial := Finding{Finding: report.Finding{Scenario: "explore-47", Oracle: effect},
		OnBuggy: Replay{Verdict: Fails, Oracle: effect, Broken: []string{effect, errs}},
		OnFixes: map[string]Replay{fix.Key(): {Verdict: Other, Oracle: errs, Broken: []string{errs}}}}
	clean := Finding{Finding: report.Finding{Scenario: "explore-51", Oracle: effect},
		OnBuggy: Replay{Verdict: Fails}, OnFixes: map[string]Replay{fix.Key(): {Verdict: Passes}}}
	c := Campaign{Bugs: []string{"b"}, Findings: []Finding{partial, clean}}
	got := judge([]Bug{bug}, c)[0]
	if got.Verdict != Found || got.Finding.Scenario != "explore-51" || got.Why != "" {
		t.Errorf("verdict %q by %s (%s), want found by explore-51", got.Verdict, got.Finding.Scenario, got.Why)
	}
	c.Findings = c.Findings[:1]
	if got := judge([]Bug{bug}, c)[0]; got.Verdict != Found || got.Finding.Scenario != "explore-47" {
		t.Errorf("with the part alone: verdict %q, want found by explore-47", got.Verdict)
	}
}

// A later fix holds an earlier one: what the earlier fixes is the earlier
// bug's, not the later one's.
func TestALaterFixGetsNoCreditForAnEarlierOne(t *testing.T) {
	first, later := "c25d", "b087"
	bugA := Bug{ID: "a", Operator: "o/p", BuggyCommit: "x", FixCommit: &first}
	bugB := Bug{ID: "b", Operator: "o/p", BuggyCommit: "x", FixCommit: &later}
	fa, _ := bugA.Fixed()
	fb, _ := bugB.Fixed()
	both := []string{"ConfigMap/c.data.cfg", "PersistentVolumeClaim/d.deleting"}
	onFix := Replay{Verdict: Fails, Differences: both[:1]}
	c := Campaign{Bugs: []string{"a", "b"}, Earlier: map[string][]string{fb.Key(): {fa.Key()}},
		Findings: []Finding{{Finding: report.Finding{Scenario: "explore-5", Oracle: "twin"}, OnBuggy: Replay{Verdict: Fails, Differences: both},
			OnFixes: map[string]Replay{fa.Key(): onFix, fb.Key(): onFix}}}}
	got := judge([]Bug{bugA, bugB}, c)
	if got[0].Verdict != Found || got[1].Verdict != NotFound {
		t.Errorf("verdicts %q, %q; want the earlier fix's bug found, the later's not", got[0].Verdict, got[1].Verdict)
	}
}

// A finding that passes only on the fix commit's whole tree (its own
// change did not apply to the buggy commit) is unconfirmed, and counted
// apart; a later finding that passes on the fix's own change is found.
func TestPassingOnlyOnTheWholeTreeIsUnconfirmed(t *testing.T) {
	fixCommit := "f"
	bug := Bug{ID: "b", Operator: "o/p", BuggyCommit: "a", FixCommit: &fixCommit}
	fix, _ := bug.Fixed()
	whole := Replay{Verdict: Passes, Tree: fix.Whole().Key()}
	c := Campaign{Bugs: []string{"b"}, Findings: []Finding{{Finding: report.Finding{Scenario: "explore-1", Oracle: "settles"},
		OnBuggy: Replay{Verdict: Fails}, OnFixes: map[string]Replay{fix.Key(): whole}}}}
	got := judge([]Bug{bug}, c)[0]
	if got.Verdict != Unconfirmed || got.Finding == nil || !strings.Contains(got.Why, "o-p-f") {
		t.Errorf("verdict %q (%s), want unconfirmed naming the tree", got.Verdict, got.Why)
	}
	if tot := total(&Result{Bugs: []BugResult{got}}); tot.Unconfirmed != 1 || tot.Found != 0 {
		t.Errorf("totals %+v, want 1 unconfirmed and none found", tot)
	}
	c.Findings = append(c.Findings, Finding{Finding: report.Finding{Scenario: "explore-2", Oracle: "settles"},
		OnBuggy: Replay{Verdict: Fails}, OnFixes: map[string]Replay{fix.Key(): {Verdict: Passes}}})
	if got := judge([]Bug{bug}, c)[0]; got.Verdict != Found || got.Finding.Scenario != "explore-2" {
		t.Errorf("verdict %q by %s, want found by explore-2", got.Verdict, got.Finding.Scenario)
	}
}

func TestFalseAlarmWhenEveryBugHasAFix(t *testing.T) {
	fix := "f"
	res := &Result{
		Bugs:      []BugResult{{Bug: Bug{ID: "a", BuggyPatch: "a.patch"}, Verdict: NotFound}, {Bug: Bug{ID: "b", FixCommit: &fix}, Verdict: NotFound}},
		Campaigns: []Campaign{{Bugs: []string{"a"}, Findings: []Finding{{OnBuggy: Replay{Verdict: Fails}, OnFixes: map[string]Replay{"t": {Verdict: Fails}}}}}},
	}
	if got := total(res); got.FalseAlarms != 1 || got.Unattributed != 0 {
		t.Errorf("a finding that fails on the unpatched tree: totals %+v, want one false alarm", got)
	}
	// A bug of the same source left out by --bug may explain it.
	res.Campaigns[0].LeftOut = []string{"c"}
	if got := total(res); got.FalseAlarms != 0 || got.Unattributed != 1 {
		t.Errorf("with a bug of its source left out: totals %+v, want it unattributed", got)
	}
}
