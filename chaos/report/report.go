// Package report is what a chaos run found: per scenario the runner's phases,
// the figures and the verdicts of the checks, the series over time, and the
// JSON (report.json, with its JSON Schema), JUnit and Markdown summary forms
// of it. The engine writes reports; htmlreport renders them; nothing in this
// package talks to a cluster.
package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Verdicts.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
	// Refused is an explore run whose spec the operator refused and said
	// why (the refusal oracle's pass): it did not converge, rightly.
	Refused = "refused"
	// Unjudged is an explore run that tells nothing of the operator: cut
	// short, its fault never fired, or its checks passed and only its
	// deletion hung (an environment that cannot run what it needs).
	Unjudged = "unjudged"
)

// Result is one scenario's run, figures and verdict.
type Result struct {
	*Run
	Figures    Figures  `json:"figures"`
	Budget     Budget   `json:"budget"`
	Violations []string `json:"violations,omitempty"`
	Timeline   []Sample `json:"timeline,omitempty"`
	// Checks are the verdicts of a scenario judged by its own assertions
	// (a scenario file); empty when Figures are judged against Budget.
	Checks []Check `json:"checks,omitempty"`
	// Series is the scenario over time: workload, operator and pods.
	Series *Series `json:"series,omitempty"`
	// Injections are what a view fault did to the operator's requests,
	// each with its time and the request it hit.
	Injections []Injection `json:"injections,omitempty"`
	// Twin compares a view-fault run with its fault-free twin.
	Twin *TwinDiff `json:"twin,omitempty"`
	// Description is what the scenario's file says it does.
	Description string `json:"description,omitempty"`
	// Refused, on an explore run that did not converge, says where the
	// operator refused its spec and said why.
	Refused string `json:"refused,omitempty"`
	// Unjudged, on an explore run the campaign did not judge, says why.
	Unjudged string `json:"unjudged,omitempty"`
	// Conditions are the resource's status conditions as the run last
	// read them.
	Conditions []Condition `json:"conditions,omitempty"`
	// Artifacts is the folder holding this scenario's evidence.
	Artifacts string        `json:"artifacts,omitempty"`
	Took      time.Duration `json:"took"`
	// Sharing, in a run of scenarios side by side, is what ran beside
	// this one.
	Sharing *Sharing `json:"sharing,omitempty"`
}

// Sharing is how a scenario shared the cluster in a run of scenarios side
// by side (gauntlet run --parallel).
type Sharing struct {
	// Beside are the scenarios that ran while it ran (its first attempt).
	Beside []string `json:"beside,omitempty"`
	// Alone is why it ran with nothing beside it: what it breaks is
	// shared, or it failed beside others and ran again alone.
	Alone string `json:"alone,omitempty"`
	// FirstAttempt holds the errors and violations of its attempt beside
	// others when that failed; the verdict is then the second attempt's,
	// made alone.
	FirstAttempt []string `json:"firstAttempt,omitempty"`
}

// Condition is a status condition of the resource.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Verdict is passed, failed or skipped.
func (r *Result) Verdict() string {
	switch {
	case r.Skipped != "":
		return Skipped
	case r.Refused != "":
		return Refused
	case r.Unjudged != "":
		return Unjudged
	case r.Failed() || len(r.Violations) > 0:
		return Failed
	}
	return Passed
}

// ReportAPIVersion versions report.json; its JSON Schema is
// chaos/report/report.schema.json. A change that a reader of the previous version
// would misread gets a new version.
const ReportAPIVersion = "gauntlet.dev/v1alpha1"

// ReportKind is report.json's kind.
const ReportKind = "ChaosReport"

// Report is a chaos run: every scenario's result.
type Report struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Seed       uint64    `json:"seed"`
	Started    time.Time `json:"started"`
	// Took is the run's wall time, from Started to the end of its last
	// scenario: scenarios run side by side overlap, and an attempt run
	// again alone counts once, so it is not the sum of their times.
	Took    time.Duration `json:"took,omitempty"`
	Cluster string        `json:"cluster,omitempty"`
	Results []*Result     `json:"results"`
	// Campaign is set on the report of a `gauntlet explore` campaign,
	// whose runs the results are.
	Campaign *Campaign `json:"campaign,omitempty"`
	// Setup is set when the run failed before any scenario: the cluster,
	// the operator or Chaos Mesh did not come up.
	Setup *SetupFailure `json:"setup,omitempty"`
}

// SetupFailure is why a run's setup failed, with its evidence.
type SetupFailure struct {
	// Step is what was being set up: cluster, images, operator, API
	// proxy, metrics access or Chaos Mesh.
	Step string `json:"step"`
	// Error is what went wrong, in one or a few lines.
	Error string `json:"error"`
	// Evidence is the state, log tail and events of each pod that would
	// not start, when that was the cause.
	Evidence string `json:"evidence,omitempty"`
	// Bundle is the folder holding the objects, events and logs collected
	// at the failure.
	Bundle string `json:"bundle,omitempty"`
}

// NewReport starts the report of a run with seed on cluster.
func NewReport(seed uint64, cluster string) *Report {
	return &Report{APIVersion: ReportAPIVersion, Kind: ReportKind, Seed: seed, Started: time.Now(), Cluster: cluster}
}

// ReadReport reads dir/report.json (or the file itself when path is one)
// and refuses a file of another kind or version.
func ReadReport(path string) (*Report, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "report.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Kind != ReportKind || r.APIVersion != ReportAPIVersion {
		return nil, fmt.Errorf("%s: apiVersion %q kind %q, want %s %s", path, r.APIVersion, r.Kind, ReportAPIVersion, ReportKind)
	}
	return r, nil
}

// Result returns the named scenario's result, or nil.
func (r *Report) Result(scenario string) *Result {
	for _, res := range r.Results {
		if res.Scenario == scenario {
			return res
		}
	}
	return nil
}

// Failed tells whether any scenario failed.
func (r *Report) Failed() bool {
	if r.Setup != nil {
		return true
	}
	for _, res := range r.Results {
		if res.Verdict() == Failed {
			return true
		}
	}
	return false
}

// Write saves report.json, junit.xml and summary.md under dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.APIVersion, r.Kind = ReportAPIVersion, ReportKind
	if r.Results == nil {
		r.Results = []*Result{} // a run whose setup failed ran none
	}
	if r.Campaign != nil {
		r.Campaign.listsNotNull()
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(r.Summary()), 0o644); err != nil {
		return err
	}
	return r.writeJUnit(filepath.Join(dir, "junit.xml"))
}

// String is the figures on one line, for progress logs.
func (f *Figures) String() string {
	return fmt.Sprintf("Degraded after %s (cleared %s after the targets were back), Available %s after the heal, writes resumed after %s (longest gap %s); ops during the fault / fault-free %s; %d ops checked (%d acked, %d ambiguous writes), %d lost, linearizable: %s; operator restarts %d, reconcile errors +%v, panics +%v",
		FormatDuration(f.TimeToDegraded), FormatDuration(f.DegradedClears), FormatDuration(f.TimeToAvailable), FormatDuration(f.WritesResumeAfter), FormatDuration(f.LongestWriteGap), f.FaultShare(), f.Operations, f.AckedWrites, f.AmbiguousWrites,
		f.WritesLost, f.Linearizable, f.OperatorRestarts, f.ErrorsDelta, f.PanicsDelta)
}

// FaultShare prints the operations acknowledged during the fault against
// the fault-free figure, "1450 / 1600 (91%)"; just the first without a
// baseline, and "—" when neither was measured (a report recorded before
// they were, or a scenario without a workload).
func (f *Figures) FaultShare() string {
	if f.FaultFreeOps <= 0 && f.OpsDuringFault == 0 {
		return "—"
	}
	if f.FaultFreeOps <= 0 {
		return fmt.Sprint(f.OpsDuringFault)
	}
	return fmt.Sprintf("%d / %d (%.0f%%)", f.OpsDuringFault, f.FaultFreeOps, 100*float64(f.OpsDuringFault)/float64(f.FaultFreeOps))
}

// FormatDuration prints a figure rounded to 100ms; a negative one never
// happened. The summary, the HTML report, the engine's checks and
// gauntlet compare all print durations this way.
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(100 * time.Millisecond).String()
}

// reportsConditions is whether some scenario's resource had a Degraded or
// an Available condition.
func (r *Report) reportsConditions() bool {
	for _, res := range r.Results {
		if res.hasCondition("Degraded") || res.hasCondition("Available") {
			return true
		}
	}
	return false
}

// hasCondition is whether the resource had the condition type at some
// moment of the run's timeline.
func (res *Result) hasCondition(typ string) bool {
	for _, s := range res.Timeline {
		if s.Status(typ) != "" {
			return true
		}
	}
	return false
}

// conditionFigure is a time to a condition's status, "—" when the
// resource never had that condition (or the run ended before the timeline
// was read).
func (res *Result) conditionFigure(typ string, d time.Duration) string {
	if !res.hasCondition(typ) {
		return "—"
	}
	return FormatDuration(d)
}

// Summary is a Markdown table of the figures, one row per scenario, then
// every violation and skip reason.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Chaos run (seed %d, %s)\n\n", r.Seed, r.Started.UTC().Format(time.RFC3339))
	if f := r.Setup; f != nil {
		fmt.Fprintf(&b, "**Setup failed** at %s; no scenario ran (evidence in %s):\n\n```\n%s\n```\n", f.Step, f.Bundle, f.Error)
		if f.Evidence != "" {
			fmt.Fprintf(&b, "\n```\n%s```\n", f.Evidence)
		}
		return b.String()
	}
	// The conventional conditions' columns, only where some resource of
	// the run reports Degraded or Available: an operator whose resource has
	// other conditions, or none, is not measured against ours.
	conds := r.reportsConditions()
	header := []string{"scenario", "verdict", "fault"}
	if conds {
		header = append(header, "to Degraded", "Degraded clears", "to Available")
	}
	header = append(header, "writes resume", "longest write gap", "ops during fault / fault-free", "ops checked", "writes lost", "linearizable")
	row := func(cells []string) {
		for len(cells) < len(header) { // a skipped scenario has no figures
			cells = append(cells, "")
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	row(header)
	b.WriteString(strings.Repeat("|---", len(header)) + "|\n")
	for _, res := range r.Results {
		f := res.Figures
		cells := []string{res.Scenario, string(res.Verdict()), res.Experiment}
		if res.Verdict() == Skipped {
			row(cells)
			continue
		}
		if conds {
			cells = append(cells, res.conditionFigure("Degraded", f.TimeToDegraded), res.conditionFigure("Degraded", f.DegradedClears),
				res.conditionFigure("Available", f.TimeToAvailable))
		}
		if f.Linearizable != "" {
			cells = append(cells, FormatDuration(f.WritesResumeAfter), FormatDuration(f.LongestWriteGap),
				f.FaultShare(), fmt.Sprint(f.Operations), fmt.Sprint(f.WritesLost), f.Linearizable)
		} else { // no write ledger: the scenario is judged on conditions and metrics
			cells = append(cells, "—", "—", "—", "—", "—", "—")
		}
		row(cells)
	}
	for _, res := range r.Results {
		switch res.Verdict() {
		case Skipped:
			fmt.Fprintf(&b, "\n**%s skipped:** %s\n", res.Scenario, res.Skipped)
		case Refused:
			fmt.Fprintf(&b, "\n**%s refused:** %s\n", res.Scenario, res.Refused)
		case Unjudged:
			fmt.Fprintf(&b, "\n**%s not judged:** %s\n", res.Scenario, res.Unjudged)
		case Failed:
			fmt.Fprintf(&b, "\n**%s failed** (replay with seed %d; evidence in %s):\n", res.Scenario, res.Seed, res.Artifacts)
			for _, e := range append(append([]string(nil), res.Errors...), res.Violations...) {
				fmt.Fprintf(&b, "- %s\n", e)
			}
		}
	}
	return b.String()
}

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Class   string        `xml:"classname,attr"`
	Time    float64       `xml:"time,attr"`
	Failure *junitMessage `xml:"failure,omitempty"`
	Skipped *junitMessage `xml:"skipped,omitempty"`
	Output  string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func (r *Report) writeJUnit(path string) error {
	s := junitSuite{Name: "gauntlet-chaos", Tests: len(r.Results)}
	if f := r.Setup; f != nil {
		s.Tests++
		s.Failures++
		s.Cases = append(s.Cases, junitCase{Name: "setup", Class: "chaos",
			Failure: &junitMessage{Message: "setup failed at " + f.Step, Text: f.Error + "\n\n" + f.Evidence}})
	}
	for _, res := range r.Results {
		c := junitCase{Name: res.Scenario, Class: "chaos", Time: res.Took.Seconds()}
		s.Time += c.Time
		switch res.Verdict() {
		case Skipped:
			s.Skipped++
			c.Skipped = &junitMessage{Message: res.Skipped}
		case Unjudged:
			s.Skipped++
			c.Skipped = &junitMessage{Message: "not judged: " + res.Unjudged}
		case Failed:
			s.Failures++
			all := append(append([]string(nil), res.Errors...), res.Violations...)
			c.Failure = &junitMessage{Message: all[0], Text: strings.Join(all, "\n")}
		}
		fig, _ := json.MarshalIndent(res.Figures, "", " ")
		c.Output = fmt.Sprintf("seed %d, %s on %v\n%s", res.Seed, res.Experiment, res.Targets, fig)
		if res.Refused != "" {
			c.Output = "refused, as the refusal oracle allows: " + res.Refused + "\n" + c.Output
		}
		s.Cases = append(s.Cases, c)
	}
	b, err := xml.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), b...), 0o644)
}

// Injection is one action the API proxy took on a request of the operator.
type Injection struct {
	At time.Time `json:"at"`
	// What the proxy did ("409", "dropped MODIFIED statefulsets db/db").
	What string `json:"what"`
	// Request is the request it hit ("patch statefulsets db/db").
	Request string `json:"request"`
}

// TwinDiff is a view-fault run beside its fault-free twin (same seed, same
// actions, the proxy without faults).
type TwinDiff struct {
	// Against is what the run was compared with: its fault-free twin
	// (empty) or, for sameAsFresh, a fresh resource with its final spec
	// ("fresh").
	Against       string `json:"against,omitempty"`
	TwinWrites    int    `json:"twinWrites"`
	FaultedWrites int    `json:"faultedWrites"`
	// Differences between the end states, path by path.
	Differences []Difference `json:"differences,omitempty"`
	// Ignored are paths that differed too but also differ between two
	// fault-free runs (noise, such as generated IDs).
	Ignored []string `json:"ignored,omitempty"`
}

// Difference is one path whose value differs between the twin and the
// faulted run.
type Difference struct {
	Path    string `json:"path"`
	Twin    string `json:"twin"`
	Faulted string `json:"faulted"`
}
