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
}

// Compare matches figures by name (and note) and judges each change against
// threshold, a fraction (0.10 is 10%): a change within it is noise.
func Compare(a, b Table, threshold float64) []Change {
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
		worse := c.New.Value > c.Old.Value
		if c.New.Better == HigherIsBetter {
			worse = c.New.Value < c.Old.Value
		}
		beyond := math.Abs(c.Percent) > threshold*100
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
func WriteComparison(w io.Writer, a, b Table, changes []Change, threshold float64) (regressions int, err error) {
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
	_, err = fmt.Fprintf(w, "\n%d regression(s) beyond %.0f%%\n", regressions, threshold*100)
	return regressions, err
}
