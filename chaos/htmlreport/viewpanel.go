package htmlreport

import (
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// span is a timeline's origin (the fault's request, else the first thing
// seen) and its x range in seconds from it: the workload's buckets when it
// ran, else the conditions, the operator's samples and the proxy's actions,
// widened to every phase.
func span(res *report.Result) (t0 time.Time, xmin, xmax float64) {
	s := res.Series
	var times []time.Time
	if s != nil && len(s.Writes) > 0 {
		times = append(times, s.Start, s.Start.Add(time.Duration(int64(len(s.Writes))*s.BucketMillis)*time.Millisecond))
	} else {
		for _, smp := range res.Timeline {
			times = append(times, smp.At)
		}
		if s != nil {
			for _, o := range s.Operator {
				times = append(times, o.At)
			}
		}
		for _, in := range res.Injections {
			times = append(times, in.At)
		}
	}
	if res.Run != nil {
		ph := res.Phases
		times = append(times, ph.Requested, ph.Injected, ph.Healed, ph.Converged)
	}
	var first, last time.Time
	for _, t := range times {
		if t.IsZero() {
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	t0 = first
	if res.Run != nil && !res.Phases.Requested.IsZero() {
		t0 = res.Phases.Requested
	}
	return t0, first.Sub(t0).Seconds(), last.Sub(t0).Seconds() + 1
}

// injectionsPanel marks each action of the API proxy (an error answered,
// an event held or dropped, a stale read served, the operator killed) at
// its time, rising by one with each, so that bursts show as steps.
func injectionsPanel(p *plot.Plot, injections []report.Injection, sec func(time.Time) float64) *plot.Plot {
	p.Title.Text = "API proxy: each action of the view fault (count so far; the report's list says what and on which request)"
	sorted := slices.Clone(injections)
	slices.SortStableFunc(sorted, func(a, b report.Injection) int { return a.At.Compare(b.At) })
	xys := make(plotter.XYs, len(sorted))
	for i, in := range sorted {
		xys[i] = plotter.XY{X: sec(in.At), Y: float64(i + 1)}
	}
	if sc, err := plotter.NewScatter(xys); err == nil {
		sc.GlyphStyle = draw.GlyphStyle{Shape: draw.PlusGlyph{}, Color: colBad, Radius: vg.Points(2.5)}
		p.Add(sc)
	}
	p.Y.Min, p.Y.Max = 0, float64(len(injections))+1
	return p
}
