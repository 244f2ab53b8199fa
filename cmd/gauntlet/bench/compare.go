package bench

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// Change is one figure in two tables.
type Change struct {
	Name string
	Unit string
	// Old and New are nil where the figure is missing from that table.
	Old, New *Figure
	// Percent is the relative change from Old to New (NaN when either is
	// missing or Old is zero).
	Percent float64
	// Regressed is true when New is worse than Old by more than the
	// threshold, in the figure's own direction.
	Regressed bool
	// Improved is true when New is better by more than the threshold.
	Improved bool
	// Unjudged says why a change is shown but not judged: a time or a rate
	// measured on machines of different speeds.
	Unjudged string
}

// speedUnits are the units of figures that follow the machine's speed:
// durations, and rates or counts reached in a set time.
var speedUnits = map[string]bool{
	"ns/op": true, "µs/op": true, "ms/op": true, "ms": true, "s": true, "min": true,
	"schedules/min": true, "steps/min": true, "runs": true, "fields": true,
}

// SpeedBound says whether a figure follows the machine's speed (a time, a
// rate); one that does not (allocations, writes, reconciles) holds on any
// machine.
func (f Figure) SpeedBound() bool { return speedUnits[f.Unit] }

// sameSpeed says whether two machines run a figure at the same speed: the
// same CPU model and as many cores.
func sameSpeed(a, b Machine) bool { return a.CPU == b.CPU && a.Cores == b.Cores }

// Thresholds are the relative changes (0.10 is 10%) within which a change
// is noise, one for each kind of figure.
type Thresholds struct {
	// Count bounds figures that hold on any machine: allocations, writes,
	// reconciles, memory.
	Count float64
	// Speed bounds times and rates, which also move with the machine's
	// load and the day: on the 2-core development machine every time of the
	// committed table measured 14% to 67% slower two days later, with the
	// same code where it was the unit benchmark's.
	Speed float64
}

// Of is the threshold f is judged by.
func (t Thresholds) Of(f Figure) float64 {
	if f.SpeedBound() {
		return t.Speed
	}
	return t.Count
}

// Compare matches figures by name (and note) and judges each change against
// its threshold: a change within it is noise. Times and rates measured on
// machines of different speeds are not judged.
func Compare(a, b Table, th Thresholds) []Change {
	key := func(f Figure) string { return f.Name + "\x00" + f.Note }
	var changes []Change
	index := map[string]int{}
	for i := range a.Figures {
		f := a.Figures[i]
		index[key(f)] = len(changes)
		changes = append(changes, Change{Name: label(f), Unit: f.Unit, Old: &f})
	}
	for i := range b.Figures {
		f := b.Figures[i]
		if j, ok := index[key(f)]; ok {
			changes[j].New = &f
			continue
		}
		changes = append(changes, Change{Name: label(f), Unit: f.Unit, New: &f})
	}
	for i := range changes {
		c := &changes[i]
		c.Percent = math.NaN()
		if c.Old == nil || c.New == nil || c.Old.Value == 0 {
			continue
		}
		c.Percent = (c.New.Value - c.Old.Value) / math.Abs(c.Old.Value) * 100
		if c.New.SpeedBound() && !sameSpeed(a.Machine, b.Machine) {
			c.Unjudged = "another machine"
			continue
		}
		worse := c.New.Value > c.Old.Value
		if c.New.Better == HigherIsBetter {
			worse = c.New.Value < c.Old.Value
		}
		beyond := math.Abs(c.Percent) > th.Of(*c.New)*100
		c.Regressed = beyond && worse
		c.Improved = beyond && !worse
	}
	return changes
}

func label(f Figure) string {
	if f.Note == "" {
		return f.Name
	}
	return f.Name + " (" + f.Note + ")"
}

// WriteComparison prints every figure's old → new value and the change, and
// returns how many regressed.
func WriteComparison(w io.Writer, a, b Table, changes []Change, th Thresholds) (regressions int, err error) {
	if a.Machine != b.Machine {
		if _, err := fmt.Fprintf(w, "note: different machines:\n  A: %s\n  B: %s\n\n", a.Machine, b.Machine); err != nil {
			return 0, err
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintf(tw, "figure\tA\tB\tchange\t\n")
	for _, c := range changes {
		old, cur := "—", "—"
		if c.Old != nil {
			old = Format(c.Old.Value, c.Old.Unit)
		}
		if c.New != nil {
			cur = Format(c.New.Value, c.New.Unit)
		}
		change := ""
		switch {
		case c.Old == nil:
			change = "only in B"
		case c.New == nil:
			change = "only in A"
		case math.IsNaN(c.Percent):
			change = "n/a"
		default:
			change = fmt.Sprintf("%+.1f%%", c.Percent)
		}
		verdict := ""
		switch {
		case c.Unjudged != "":
			verdict = "not judged: " + c.Unjudged
		case c.Regressed:
			verdict = "REGRESSION"
			regressions++
		case c.Improved:
			verdict = "better"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, old, cur, change, verdict)
	}
	if err := tw.Flush(); err != nil {
		return regressions, err
	}
	if th.Count == th.Speed {
		_, err = fmt.Fprintf(w, "\n%d regression(s) beyond %.0f%%\n", regressions, th.Count*100)
		return regressions, err
	}
	_, err = fmt.Fprintf(w, "\n%d regression(s) beyond %.0f%% (times and rates: %.0f%%)\n", regressions, th.Count*100, th.Speed*100)
	return regressions, err
}
