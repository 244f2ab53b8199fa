package bugbench

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExpectedAndRegressions(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "B.md")
	write(t, doc, `# Figures

| figure | value |
|---|---|
| found | 3 |

| bug | operator | verdict | minutes |
|---|---|---|---|
| `+"`hot-loop`"+` | ref | found | 2.1 |
| pdb | ref | found (after 3 min) | 3.0 |
| impatient | ref | not found: no finding | - |

| bug | on | verdict |
|---|---|---|
| stale | envtest | found |
| final-snapshot | kind | found |
| scale-down | kind | not found |
`)
	got, err := Expected(doc, "envtest")
	if err != nil || !slices.Equal(got, []string{"hot-loop", "pdb", "stale"}) {
		t.Fatalf("Expected = %v, %v; want [hot-loop pdb stale]", got, err)
	}
	if onKind, _ := Expected(doc, "kind"); !slices.Equal(onKind, []string{"final-snapshot"}) {
		t.Fatalf("Expected on kind = %v, want [final-snapshot]", onKind)
	}
	res := &Result{Bugs: []BugResult{
		{Bug: Bug{ID: "hot-loop"}, Verdict: Found},
		{Bug: Bug{ID: "pdb"}, Verdict: NotFound, Why: "no finding"},
		{Bug: Bug{ID: "impatient"}, Verdict: NotFound},
	}}
	if lost := res.Regressions(got); len(lost) != 1 || !strings.HasPrefix(lost[0], "pdb: not found") {
		t.Errorf("Regressions = %v, want pdb alone", lost)
	}
}
