package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/explore"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// campaign is one `gauntlet explore` campaign's runs: each sequence as a
// scenario of the base, judged by the automatic oracles, with the follows
// learned so far from the resources created along the way.
type campaign struct {
	e       *Engine
	o       ExploreOptions
	base    *scenario.Scenario
	learned followLearner
}

// scenario is the campaign's scenario for seq, with the follows learned
// for the fields seq sets.
func (c *campaign) scenario(name string, seq []explore.Step) *scenario.Scenario {
	s := c.e.campaignScenario(c.base, name, seq)
	fields := fieldsOf(seq)
	s.Spec.Assertions.Follows = c.learned.follows(fields)
	if c.e.refusable == nil {
		c.e.refusable = map[string][]string{}
	}
	c.e.refusable[name] = fields
	return s
}

// run runs seq and learns from the fresh resource the differential
// oracle created with its final spec.
func (c *campaign) run(ctx context.Context, name string, seq []explore.Step, seed uint64, artifacts string) *report.Result {
	res, fresh := c.e.runDifferential(ctx, c.scenario(name, seq), seed, artifacts)
	c.learned.observe(fresh)
	return res
}

// finding shrinks a failing sequence to the fewest steps that break the
// same oracle and writes it as a scenario file.
func (c *campaign) finding(ctx context.Context, name string, seq []explore.Step, oracle, what string) report.Finding {
	e, o := c.e, c.o
	f := report.Finding{Scenario: name, Oracle: oracle, What: what, Steps: stepList(seq)}
	shrunk := seq
	if !o.NoShrink && len(seq) > 1 {
		n := 0
		shrunk = explore.Shrink(seq, func(try []explore.Step) bool {
			n++
			res := c.run(ctx, fmt.Sprintf("%s-shrink-%d", name, n), try, ScenarioSeed(o.Seed, 0), filepath.Join(o.Artifacts, "shrink"))
			got, _ := classify(res, try)
			e.logf("%s: shrinking, %s: %s", name, stepNames(try), map[bool]string{true: "still fails", false: "passes"}[got == oracle])
			return got == oracle
		})
	}
	f.Shrunk = stepList(shrunk)
	file, err := e.writeFinding(o.Artifacts, c.base, c.scenario(name, shrunk), oracle, what)
	if err != nil {
		f.File = "not written: " + err.Error()
		return f
	}
	f.File = file
	e.logf("%s: FINDING (%s), shrunk to %s: %s", name, oracle, stepNames(shrunk), file)
	return f
}

// campaignScenario is the base scenario with the sequence's steps as its
// actions, each but the last followed by a wait to converge, no fault,
// and the automatic oracles as its assertions.
func (e *Engine) campaignScenario(base *scenario.Scenario, name string, seq []explore.Step) *scenario.Scenario {
	s := *base
	s.Metadata = scenario.Metadata{Name: name, Description: "explore: " + stepNames(seq)}
	s.Spec.Before, s.Spec.Workload = nil, nil
	s.Spec.During = nil
	for i, st := range seq {
		if i > 0 {
			s.Spec.During = append(s.Spec.During, scenario.Action{Converge: true})
		}
		s.Spec.During = append(s.Spec.During, scenario.Action{Patch: st.Patch()})
	}
	s.Spec.Fault = scenario.Fault{Action: scenario.ActionNone, Hold: metav1.Duration{Duration: time.Second}}
	stable := base.Spec.Assertions.StableFor
	if stable == nil {
		stable = &metav1.Duration{Duration: 5 * time.Second}
	}
	s.Spec.Assertions = scenario.Assertions{StableFor: stable, SameAsFresh: true, TruthfulStatus: true}
	e.o.Set.Files[name] = e.o.Set.Files[base.Metadata.Name]
	return &s
}
