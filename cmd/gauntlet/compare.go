package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

func newCompareCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "compare A B",
		Short:   "Print two runs' figures side by side, scenario by scenario, with the change",
		Example: `  gauntlet compare artifacts/chaos-20261123-101500 artifacts/chaos-20261124-170000`,
		Args:    exactArgs("A", "B"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			a, _, err := readRun(args[0])
			if err != nil {
				return err
			}
			b, _, err := readRun(args[1])
			if err != nil {
				return err
			}
			return compare(cmd.OutOrStdout(), a, b)
		},
	}
}

// figure is one compared row and how to read it from a scenario's figures.
type figure struct {
	name string
	dur  func(*report.Figures) time.Duration
	num  func(*report.Figures) float64
	text func(*report.Figures) string
}

var compared = []figure{
	{name: "to Degraded", dur: func(f *report.Figures) time.Duration { return f.TimeToDegraded }},
	{name: "Degraded clears", dur: func(f *report.Figures) time.Duration { return f.DegradedClears }},
	{name: "to Available", dur: func(f *report.Figures) time.Duration { return f.TimeToAvailable }},
	{name: "writes resume", dur: func(f *report.Figures) time.Duration { return f.WritesResumeAfter }},
	{name: "longest write gap", dur: func(f *report.Figures) time.Duration { return f.LongestWriteGap }},
	{name: "ops during fault", num: func(f *report.Figures) float64 { return float64(f.OpsDuringFault) }},
	{name: "ops checked", num: func(f *report.Figures) float64 { return float64(f.Operations) }},
	{name: "writes lost", num: func(f *report.Figures) float64 { return float64(f.WritesLost) }},
	{name: "reconcile errors", num: func(f *report.Figures) float64 { return f.ErrorsDelta }},
	{name: "operator restarts", num: func(f *report.Figures) float64 { return float64(f.OperatorRestarts) }},
	{name: "linearizable", text: func(f *report.Figures) string { return f.Linearizable }},
}

// compare writes, for every scenario of either run, a row per figure: A, B
// and the change.
func compare(w io.Writer, a, b *report.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "scenario\tfigure\tA (seed %d)\tB (seed %d)\tchange\n", a.Seed, b.Seed)
	var names []string
	for _, r := range append(slices.Clone(a.Results), b.Results...) {
		if !slices.Contains(names, r.Scenario) {
			names = append(names, r.Scenario)
		}
	}
	for _, name := range names {
		ra, rb := a.Result(name), b.Result(name)
		change := sameOr(verdict(ra), verdict(rb))
		switch {
		case ra == nil:
			change = "only in B"
		case rb == nil:
			change = "only in A"
		}
		_, _ = fmt.Fprintf(tw, "%s\tverdict\t%s\t%s\t%s\n", name, verdict(ra), verdict(rb), change)
		if !ran(ra) || !ran(rb) {
			continue
		}
		for _, f := range compared {
			fa, fb := &ra.Figures, &rb.Figures
			switch {
			case f.dur != nil:
				da, db := f.dur(fa), f.dur(fb)
				_, _ = fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\n", f.name, report.FormatDuration(da), report.FormatDuration(db), durChange(da, db))
			case f.num != nil:
				na, nb := f.num(fa), f.num(fb)
				_, _ = fmt.Fprintf(tw, "\t%s\t%v\t%v\t%s\n", f.name, na, nb, numChange(na, nb))
			default:
				_, _ = fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\n", f.name, f.text(fa), f.text(fb), sameOr(f.text(fa), f.text(fb)))
			}
		}
	}
	return tw.Flush()
}

func verdict(r *report.Result) string {
	if r == nil {
		return "absent"
	}
	return r.Verdict()
}

func ran(r *report.Result) bool { return r != nil && r.Verdict() != report.Skipped }

func sameOr(a, b string) string {
	if a == b {
		return "="
	}
	return "changed"
}

// durChange is B-A with its sign and, when A is not zero, the ratio.
func durChange(a, b time.Duration) string {
	switch {
	case a < 0 && b < 0:
		return "="
	case a < 0 || b < 0:
		return "changed"
	}
	d := (b - a).Round(100 * time.Millisecond)
	if d == 0 {
		return "="
	}
	s := d.String()
	if d > 0 {
		s = "+" + s
	}
	if a > 0 {
		s += fmt.Sprintf(" (%+.0f%%)", 100*float64(b-a)/float64(a))
	}
	return s
}

func numChange(a, b float64) string {
	if a == b {
		return "="
	}
	s := fmt.Sprintf("%+g", b-a)
	if a != 0 {
		s += fmt.Sprintf(" (%+.0f%%)", 100*(b-a)/a)
	}
	return s
}
