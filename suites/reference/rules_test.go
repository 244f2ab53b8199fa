package reference

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// ruleID is how a rule's ID is spelled.
var ruleID = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)+$`)

// Markers: a "Rule: <id>" comment line in Go, "<!-- rule: <id> -->" in
// markdown. Both are matched case-insensitively, so that a misspelt marker
// is reported rather than missed.
var (
	goMarker = regexp.MustCompile(`(?i)^\s*//\s*rule:\s*(.*?)\s*$`)
	mdMarker = regexp.MustCompile(`(?i)<!--\s*rule:\s*(.*?)\s*-->`)
)

// TestEveryDocumentedRuleHasAnInvariant holds DocumentedRules, the
// simulation's invariants and the rule markers in the operator's Go files
// and markdown to each other (ruleProblems): a rule that names no
// invariant, or one invariants() does not have, fails; so does a marker
// for a rule the table does not list (the docs state a rule no invariant
// checks), and a rule whose Source carries no marker.
func TestEveryDocumentedRuleHasAnInvariant(t *testing.T) {
	checked := map[string]bool{}
	for _, inv := range (&simWorld{}).invariants() {
		checked[inv.Name] = true
	}
	markers, malformed := scanRuleMarkers(t, filepath.Join(repoRoot, "operator"))
	for _, p := range append(malformed, ruleProblems(DocumentedRules, checked, markers)...) {
		t.Error(p)
	}
	NewWithT(t).Expect(markers).NotTo(BeEmpty(), "no rule markers under operator/")
	t.Logf("%d documented rules, marked in the operator's docs, each checked by one of %d invariants", len(DocumentedRules), len(checked))
}

// ruleProblems compares the rules with the invariants' names and with the
// markers found (rule ID → files that mark it); it returns one line per
// problem, in a stable order.
func ruleProblems(rules []Rule, invariants map[string]bool, markers map[string][]string) []string {
	var out []string
	listed := map[string]bool{}
	for _, r := range rules {
		switch {
		case !ruleID.MatchString(r.ID):
			out = append(out, fmt.Sprintf("rule %q: an ID is lower-case words joined by dashes", r.ID))
		case listed[r.ID]:
			out = append(out, fmt.Sprintf("rule %s is listed twice", r.ID))
		case r.Says == "":
			out = append(out, fmt.Sprintf("rule %s says nothing", r.ID))
		case r.Invariant == "":
			out = append(out, fmt.Sprintf("rule %s names no invariant: add one (siminvariants.go, simrules*.go) and name it", r.ID))
		case !invariants[r.Invariant]:
			out = append(out, fmt.Sprintf("rule %s names invariant %q, which invariants() does not have", r.ID, r.Invariant))
		case !slices.Contains(markers[r.ID], r.Source):
			out = append(out, fmt.Sprintf("rule %s: its source %s carries no marker for it (marked in %v)", r.ID, r.Source, markers[r.ID]))
		}
		listed[r.ID] = true
	}
	var unlisted []string
	for id, where := range markers {
		if !listed[id] {
			unlisted = append(unlisted, fmt.Sprintf("%s states rule %q, which DocumentedRules does not list: add it with the invariant that checks it", strings.Join(where, ", "), id))
		}
	}
	sort.Strings(unlisted)
	return append(out, unlisted...)
}

func TestRuleProblems(t *testing.T) {
	invariants := map[string]bool{"checks a": true, "checks b": true}
	rule := func(id, inv string) Rule {
		return Rule{ID: id, Source: "operator/a.go", Says: "says " + id, Invariant: inv}
	}
	marked := map[string][]string{"rule-a": {"operator/a.go", "operator/README.md"}, "rule-b": {"operator/a.go"}}
	for _, tc := range []struct {
		name    string
		rules   []Rule
		markers map[string][]string
		want    []string // substrings, one per problem
	}{
		{name: "every rule marked and checked", rules: []Rule{rule("rule-a", "checks a"), rule("rule-b", "checks a")}, markers: marked},
		{name: "no invariant", rules: []Rule{rule("rule-a", "checks a"), rule("rule-b", "")}, markers: marked,
			want: []string{"rule rule-b names no invariant"}},
		{name: "an invariant that does not exist", rules: []Rule{rule("rule-a", "checks a"), rule("rule-b", "checks c")}, markers: marked,
			want: []string{`rule rule-b names invariant "checks c", which invariants() does not have`}},
		{name: "a marked rule not in the table", rules: []Rule{rule("rule-a", "checks a")}, markers: marked,
			want: []string{`operator/a.go states rule "rule-b", which DocumentedRules does not list`}},
		{name: "a rule its source does not mark", rules: []Rule{rule("rule-a", "checks a"), rule("rule-b", "checks b")},
			markers: map[string][]string{"rule-a": {"operator/a.go"}, "rule-b": {"operator/README.md"}},
			want:    []string{"rule rule-b: its source operator/a.go carries no marker"}},
		{name: "listed twice", rules: []Rule{rule("rule-a", "checks a"), rule("rule-a", "checks a"), rule("rule-b", "checks b")}, markers: marked,
			want: []string{"rule rule-a is listed twice"}},
		{name: "a malformed ID", rules: []Rule{rule("Rule A", "checks a"), rule("rule-a", "checks a"), rule("rule-b", "checks b")}, markers: marked,
			want: []string{`rule "Rule A": an ID is lower-case words`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ruleProblems(tc.rules, invariants, tc.markers)
			g.Expect(got).To(HaveLen(len(tc.want)), "%q", got)
			for i, w := range tc.want {
				g.Expect(got[i]).To(ContainSubstring(w))
			}
		})
	}
}

func TestMarkersIn(t *testing.T) {
	for _, tc := range []struct {
		name, text    string
		marker        *regexp.Regexp
		ids           []string
		malformedSeen int
	}{
		{name: "go", marker: goMarker, text: "// One at a time.\n// Rule: rollout-one-at-a-time\n\t// Rule: small-cluster-not-rolled\nx := 1 // Rule: not-a-marker\n", ids: []string{"rollout-one-at-a-time", "small-cluster-not-rolled"}},
		{name: "go, misspelt", marker: goMarker, text: "// rule: Rollout one at a time\n// RULE:\n", malformedSeen: 2},
		{name: "markdown", marker: mdMarker, text: "- one at a time\n  <!-- rule: rollout-one-at-a-time -->\n<!--rule:small-cluster-not-rolled--> text\n", ids: []string{"rollout-one-at-a-time", "small-cluster-not-rolled"}},
		{name: "markdown, misspelt", marker: mdMarker, text: "<!-- Rule: rollout_one -->\n", malformedSeen: 1},
		{name: "none", marker: mdMarker, text: "rule: x\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ids, malformed := markersIn("f", tc.text, tc.marker)
			g.Expect(ids).To(Equal(tc.ids))
			g.Expect(malformed).To(HaveLen(tc.malformedSeen), "%q", malformed)
		})
	}
}

// scanRuleMarkers returns, for each rule ID marked in the Go files (tests
// left out) and markdown under dir, the files (from the repository's root)
// that mark it, and a line per malformed marker.
func scanRuleMarkers(t *testing.T, dir string) (map[string][]string, []string) {
	t.Helper()
	out := map[string][]string{}
	var malformed []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") {
			return err
		}
		marker := map[string]*regexp.Regexp{".go": goMarker, ".md": mdMarker}[filepath.Ext(path)]
		if marker == nil {
			return nil
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		ids, bad := markersIn(rel, string(text), marker)
		malformed = append(malformed, bad...)
		for _, id := range ids {
			if !slices.Contains(out[id], rel) {
				out[id] = append(out[id], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, malformed
}

// markersIn lists the rule IDs a file's markers name, and a line for each
// marker that does not spell an ID.
func markersIn(file, text string, marker *regexp.Regexp) (ids, malformed []string) {
	for i, line := range strings.Split(text, "\n") {
		for _, m := range marker.FindAllStringSubmatch(line, -1) {
			if !ruleID.MatchString(m[1]) {
				malformed = append(malformed, fmt.Sprintf("%s:%d: malformed rule marker %q: want a rule ID (lower-case words joined by dashes)", file, i+1, m[0]))
				continue
			}
			ids = append(ids, m[1])
		}
	}
	return ids, malformed
}
