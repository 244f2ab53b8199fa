package bugbench

import (
	"context"
	"fmt"
	"strings"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// A recorded run judged again: its replays read anew, and fixes written
// since replayed on its findings.

// Rejudge judges a recorded run's replays again, from their reports, and
// recomputes every verdict and total: a run made before the judgement
// changed needs no campaign run again (Runner.Update first brings it up
// to a benchmark file: its fixes, their replays and ancestry).
func Rejudge(res *Result) error {
	bugs := map[string]Bug{}
	for _, b := range res.Bugs {
		bugs[b.Bug.ID] = b.Bug
	}
	var out []BugResult
	for ci := range res.Campaigns {
		c := &res.Campaigns[ci]
		for fi := range c.Findings {
			f := &c.Findings[fi]
			if len(f.Fields) == 0 {
				f.Fields = fieldsOf(f.Shrunk) // recorded before findings carried them
			}
			var err error
			if f.OnBuggy, err = rejudge(f.OnBuggy, f.Finding); err != nil {
				return err
			}
			for k, r := range f.OnFixes {
				if f.OnFixes[k], err = rejudge(r, f.Finding); err != nil {
					return err
				}
			}
		}
		var group []Bug
		for _, id := range c.Bugs {
			group = append(group, bugs[id])
		}
		out = append(out, judge(group, *c)...)
	}
	for _, b := range res.Bugs {
		if b.Verdict == NotRun {
			out = append(out, b)
		}
	}
	res.Bugs = out
	res.Totals = total(res)
	return nil
}

// rejudge reads a failed replay's report again.
func rejudge(r Replay, f report.Finding) (Replay, error) {
	if (r.Verdict != Fails && r.Verdict != Other) || r.Report == "" {
		return r, nil
	}
	r, err := judgeReplay(r.Report, f, r)
	if err != nil {
		return r, fmt.Errorf("%s: %w", r.Report, err)
	}
	return r, nil
}

// fieldsOf reads the fields back from shrunk steps as explore prints them
// ("spec.a.b=value (in a new spec.a) at creation", "spec.a back as it
// was"): each step's field, and the parent it was set inside.
func fieldsOf(shrunk []string) []string {
	var out []string
	for _, step := range shrunk {
		field, _, _ := strings.Cut(step, "=")
		field, _, _ = strings.Cut(field, " back as it was")
		out = append(out, field)
		if _, rest, ok := strings.Cut(step, "(in a new "); ok {
			if parent, _, ok := strings.Cut(rest, ")"); ok {
				out = append(out, parent)
			}
		}
	}
	return out
}

// Update brings a recorded run up to the benchmark file before it is
// judged again: each bug as the file states it now, and each replayed
// finding run on every fix of its campaign it was not run on (a fix
// written since the campaign), with the fixes' ancestry made again.
func (r *Runner) Update(ctx context.Context, res *Result) error {
	now := map[string]Bug{}
	for i := range res.Bugs {
		bug, err := r.File.Select([]string{res.Bugs[i].Bug.ID})
		if err != nil {
			return err
		}
		res.Bugs[i].Bug, now[bug[0].ID] = bug[0], bug[0]
	}
	for ci := range res.Campaigns {
		c := &res.Campaigns[ci]
		var group []Bug
		for _, id := range c.Bugs {
			group = append(group, now[id])
		}
		c.LeftOut = r.leftOut(*c)
		b := r.File.Bench(group[0], r.Options.Kind)
		if b == nil || c.Error != "" {
			continue
		}
		for fi := range c.Findings {
			f := &c.Findings[fi]
			if f.SameCauseAs == "" && f.OnBuggy.Verdict == Fails {
				r.replayOnFixes(ctx, group, b, f)
			}
		}
		var err error
		if c.Earlier, err = r.earlierFixes(ctx, group, b); err != nil {
			return err
		}
	}
	return ctx.Err()
}
