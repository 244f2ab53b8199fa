// Package htmlreport renders a chaos run's report.json as one
// self-contained HTML page (no script, no stylesheet or font fetched): a
// summary table, then per scenario a timeline on one time axis (the fault
// window, each condition's state, pod changes, acknowledged writes and
// their latency, the operator's reconciles and errors) drawn with gonum/plot
// as inline SVG, and every verdict beside its budget, with links to the
// scenario's evidence when the run left any.
package htmlreport

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// FileName is the report's name in a run's folder.
const FileName = "report.html"

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"dur": report.FormatDuration,
	// short cuts a long text (a finding's last observed status) to a
	// line or two; the run's own section has it whole.
	"short": func(s string) string {
		if r := []rune(s); len(r) > 280 {
			return string(r[:280]) + "… (whole under the run)"
		}
		return s
	},
	"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
}).Parse(pageTemplate))

// view is what the template reads.
type view struct {
	Report              *report.Report
	Passed, Failed, Skp int
	// Refused are explore runs the operator refused, saying why;
	// Unjudged those the campaign did not judge.
	Refused, Unjudged int
	// Took is the run's wall time (the sum of the scenarios' times in a
	// report written before reports kept it).
	Took      time.Duration
	Scenarios []scenarioView
}

type scenarioView struct {
	*report.Result
	Verdict string
	Checks  []report.Check
	// Conditions are the condition checks, for the summary.
	Conditions []report.Check
	// Over names the summary columns whose figure is over its budget.
	Over    map[string]bool
	Plot    template.HTML
	Links   []link
	Figures *report.Figures
}

type link struct{ Text, Href string }

// Render returns the page for rep. dir is the run's folder: links to a
// scenario's evidence (failure bundle, history, porcupine's visualisation)
// are made relative to it, and only for what exists there.
func Render(rep *report.Report, dir string) ([]byte, error) {
	v := view{Report: rep, Took: rep.Took}
	for _, res := range rep.Results {
		sv := scenarioView{Result: res, Verdict: res.Verdict(), Figures: &res.Figures, Over: map[string]bool{}}
		if rep.Took == 0 {
			v.Took += res.Took
		}
		switch sv.Verdict {
		case report.Passed:
			v.Passed++
		case report.Failed:
			v.Failed++
		case report.Refused:
			v.Refused++
		case report.Unjudged:
			v.Unjudged++
		default:
			v.Skp++
		}
		switch {
		case len(res.Checks) > 0: // judged by its own assertions (a scenario file)
			sv.Checks = res.Checks
		case sv.Verdict != report.Skipped && res.Phases.Converged.After(res.Phases.Start):
			sv.Checks = report.Checks(res.Figures, res.Budget)
		}
		for _, c := range sv.Checks {
			if !c.OK() {
				sv.Over[c.Name] = true
			}
			if c.Kind == "condition" {
				sv.Conditions = append(sv.Conditions, c)
			}
		}
		svg, err := timeline(res)
		if err != nil {
			return nil, fmt.Errorf("%s: drawing the timeline: %w", res.Scenario, err)
		}
		sv.Plot = template.HTML(svg) //nolint:gosec // SVG written by gonum/plot from numbers and our own labels
		sv.Links = evidence(res, dir)
		v.Scenarios = append(v.Scenarios, sv)
	}
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write renders rep into dir/report.html and returns its path.
func Write(rep *report.Report, dir string) (string, error) {
	b, err := Render(rep, dir)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, FileName)
	return p, os.WriteFile(p, b, 0o644)
}

// Save writes rep into dir as report.json (report.Report.Write) and as
// report.html.
func Save(rep *report.Report, dir string) error {
	if err := rep.Write(dir); err != nil {
		return err
	}
	_, err := Write(rep, dir)
	return err
}

// evidence links what a scenario left in its folder.
func evidence(res *report.Result, dir string) []link {
	if res.Artifacts == "" {
		return nil
	}
	folder := res.Artifacts
	if !filepath.IsAbs(folder) {
		// Recorded relative to where the run started, or to the run's folder.
		if _, err := os.Stat(folder); err != nil {
			folder = filepath.Join(dir, filepath.Base(folder))
		}
	}
	var out []link
	for _, f := range []struct{ text, name string }{
		{"porcupine's linearizability visualisation", "linearizability.html"},
		{"workload history (history.json)", "history.json"},
		{"failure bundle: objects, events, logs", ""},
	} {
		p := filepath.Join(folder, f.name)
		fi, err := os.Stat(p)
		if err != nil || (f.name == "" && !bundle(p)) || (f.name != "" && fi.IsDir()) {
			continue
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			rel = p
		}
		out = append(out, link{Text: f.text, Href: filepath.ToSlash(rel)})
	}
	return out
}

// bundle tells whether a scenario folder holds more than the history: a
// failure bundle's namespaces.
func bundle(folder string) bool {
	entries, err := os.ReadDir(folder)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}
