package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Campaign is what a `gauntlet explore` campaign tried and found
// (explore.json, and the report of its runs).
type Campaign struct {
	Base string `json:"base"`
	Seed uint64 `json:"seed"`
	// Shard is "k/n" for one shard's campaign, which ran the plan's
	// sequences i with i mod n == k; Shards is n for the campaign merged
	// from them.
	Shard  string `json:"shard,omitempty"`
	Shards int    `json:"shards,omitempty"`
	// OnCluster says the campaign ran on a cluster (kind, or an existing
	// one), not envtest: its findings replay there.
	OnCluster bool `json:"onCluster,omitempty"`
	// Set are the --set NAME=VALUE variables the campaign ran with: its
	// findings replay with them.
	Set []string `json:"set,omitempty"`
	// Fields are the spec fields generated for; Skipped those not, with why.
	Fields  []string `json:"fields"`
	Skipped []string `json:"skipped,omitempty"`
	// Refused are steps the API server refused in a dry run, with its
	// answer: the schema and its CEL rules at work, not findings.
	Refused []string `json:"refused,omitempty"`
	// VersionSkews are values one served version of the CRD admits and
	// another refuses, at the same field: an object one version takes
	// that the other cannot hold (findings, with no run to shrink).
	VersionSkews []string `json:"versionSkews,omitempty"`
	// CrossVersion is how many values were also dry-run through another
	// served version (those whose field it has).
	CrossVersion int `json:"crossVersion"`
	// Follows are the children's fields learned to carry a spec field's
	// value (spec.image → StatefulSet/demo spec.template...image), which
	// the consistency oracle judged.
	Follows []string `json:"follows,omitempty"`
	// Covered are the fields some run changed; CoveredAfter says how
	// long into the campaign each first was.
	Covered      []string                 `json:"covered"`
	CoveredAfter map[string]time.Duration `json:"coveredAfter,omitempty"`
	Runs         int                      `json:"runs"`
	Findings     []Finding                `json:"findings,omitempty"`
	// Causes group the findings by the oracle they broke and where
	// (GroupFindings).
	Causes []Cause `json:"causes,omitempty"`
	// AllCoveredAfter is how long the campaign took to change every
	// field it generated for (0: it did not).
	AllCoveredAfter time.Duration `json:"allCoveredAfter,omitempty"`
	// Took is the campaign's time; StepsPerMinute its pace.
	Took           time.Duration `json:"took"`
	StepsPerMinute float64       `json:"stepsPerMinute"`
}

// Finding is a failing sequence, shrunk, and the scenario file that
// replays it.
type Finding struct {
	Scenario string `json:"scenario"`
	Oracle   string `json:"oracle"`
	What     string `json:"what"`
	// Where is the first place the oracle saw broken, when it names one:
	// the object and path where the end state first differed from the
	// fresh resource's or the fault-free twin's.
	Where string   `json:"where,omitempty"`
	Steps []string `json:"steps"`
	// After is how long into the campaign it was found (shrinking done);
	// Run is the campaign's run that found it (1 for the first).
	After time.Duration `json:"after"`
	Run   int           `json:"run,omitempty"`
	// Fault is the fault the shrunk steps need to break the oracle, in a
	// few words ("" for none), and FaultAction its action (pod-kill,
	// stale-view, ...), which says its layer.
	Fault       string   `json:"fault,omitempty"`
	FaultAction string   `json:"faultAction,omitempty"`
	Shrunk      []string `json:"shrunk"`
	// Fields are the spec fields the shrunk steps set, which the refusal
	// oracle looks for in the conditions (Oracle).
	Fields []string `json:"fields,omitempty"`
	File   string   `json:"file"`
	// Again are the later runs that broke the same oracle in the same
	// place (SameCause), counted here rather than shrunk into findings
	// of their own, so one bug seen often does not spend the budget.
	Again []string `json:"again,omitempty"`
}

// Save writes dir/explore.json.
func (x *Campaign) Save(dir string) error {
	x.listsNotNull()
	b, err := json.MarshalIndent(x, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "explore.json"), b, 0o644)
}

// Summary is the campaign for a person: what was tried, what the API
// server refused (the first few unless all), and each finding with the
// command that replays it.
func (x *Campaign) Summary(operatorFile string, all bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Explore campaign (seed %d, from scenario %s)\n\n", x.Seed, x.Base)
	fmt.Fprintf(&b, "- %d runs in %s, %.1f steps a minute\n", x.Runs, x.Took.Round(time.Second), x.StepsPerMinute)
	if x.Shards > 0 {
		fmt.Fprintf(&b, "- run as %d shards of an Indexed Job, side by side; their reports are under shard-<k>\n", x.Shards)
	}
	if x.Shard != "" {
		fmt.Fprintf(&b, "- shard %s: the plan's sequences i with i mod n == k\n", x.Shard)
	}
	fmt.Fprintf(&b, "- fields: %d generated for, %d changed by some run: %s\n", len(x.Fields), len(x.Covered), strings.Join(x.Covered, ", "))
	if x.AllCoveredAfter > 0 {
		fmt.Fprintf(&b, "- every field changed by some run after %s\n", x.AllCoveredAfter.Round(time.Second))
	}
	if len(x.Skipped) > 0 {
		fmt.Fprintf(&b, "- not generated for: %s\n", strings.Join(x.Skipped, ", "))
	}
	fmt.Fprintf(&b, "- children's fields learned to follow a spec field (the consistency oracle): %d\n", len(x.Follows))
	for _, f := range x.Follows {
		fmt.Fprintf(&b, "  - %s\n", f)
	}
	fmt.Fprintf(&b, "- refused by the API server in a dry run: %d values\n", len(x.Refused))
	for i, r := range x.Refused {
		if i == 5 && !all {
			fmt.Fprintf(&b, "  - and %d more (explore.md lists them all)\n", len(x.Refused)-i)
			break
		}
		if len(r) > 400 {
			r = r[:400] + "… (explore.json holds it whole)"
		}
		fmt.Fprintf(&b, "  - %s\n", r)
	}
	fmt.Fprintf(&b, "- admitted through one served version and refused through another: %d (of %d values also tried through another version)\n", len(x.VersionSkews), x.CrossVersion)
	for _, v := range x.VersionSkews {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	fmt.Fprintf(&b, "- findings: %d", len(x.Findings))
	if len(x.Causes) > 0 {
		fmt.Fprintf(&b, ", in %d causes (an oracle broken in one place)", len(x.Causes))
	}
	b.WriteString("\n")
	for _, c := range x.Causes {
		fmt.Fprintf(&b, "  - %q at %s: %s\n", c.Oracle, c.Where, strings.Join(c.Findings, ", "))
	}
	for _, f := range x.Findings {
		fmt.Fprintf(&b, "\n**%s** broke %q (found %s into the campaign): %s\n", f.Scenario, f.Oracle, f.After.Round(time.Second), f.What)
		fmt.Fprintf(&b, "- steps: %s; shrunk to: %s\n", strings.Join(f.Steps, ", then "), strings.Join(f.Shrunk, ", then "))
		if f.Fault != "" {
			fmt.Fprintf(&b, "- under the fault: %s\n", f.Fault)
		}
		if len(f.Again) > 0 {
			fmt.Fprintf(&b, "- the same cause again in %s (not shrunk)\n", strings.Join(f.Again, ", "))
		}
		where := "--envtest "
		if x.OnCluster {
			where = "" // on a kind cluster, or --kubeconfig's
		}
		fmt.Fprintf(&b, "- replay: gauntlet run %s-f %s -f %s%s\n", where, operatorFile, f.File, SetFlags(x.Set))
	}
	return b.String()
}

// SetFlags are the --set flags of a campaign's variables, each led by a
// space ("" for none), quoted where a shell would split them.
func SetFlags(set []string) string {
	var b strings.Builder
	for _, kv := range set {
		b.WriteString(" --set ")
		if strings.ContainsAny(kv, " \t'\"$`\\") {
			b.WriteString("'" + strings.ReplaceAll(kv, "'", `'\''`) + "'")
			continue
		}
		b.WriteString(kv)
	}
	return b.String()
}

// listsNotNull makes the lists the schema requires empty rather than
// null: a campaign that ended at its starting resource changed no field,
// and that finding has no step.
func (x *Campaign) listsNotNull() {
	for _, l := range []*[]string{&x.Fields, &x.Covered} {
		if *l == nil {
			*l = []string{}
		}
	}
	for i := range x.Findings {
		for _, l := range []*[]string{&x.Findings[i].Steps, &x.Findings[i].Shrunk} {
			if *l == nil {
				*l = []string{}
			}
		}
	}
}
