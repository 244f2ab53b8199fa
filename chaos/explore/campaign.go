package explore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
	"github.com/gauntlet-dev/gauntlet/chaos/faultplan"
	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// campaign is one `gauntlet explore` campaign's runs: each sequence as a
// scenario of the base, judged by the automatic oracles, with the follows
// learned so far from the resources created along the way.
type campaign struct {
	e       Engine
	o       Options
	base    *scenario.Scenario
	learned compare.FollowLearner
	// refWrites are the writes of the reference run until it converged
	// (faultplan.Writes) to resources other than plural, the
	// resource's; followed, the fields and writes a follow-up kill
	// already held.
	refWrites map[string][]string
	plural    string
	followed  map[string]bool
	// roles are those the fault menu's faults target that the base does
	// not define (the operator's, a set's first member).
	roles map[string]scenario.Role
	// aside are the oracles the starting resource broke as it is, the
	// campaign's first finding (x.Findings[0]): a later run that breaks
	// one is that finding again, wherever its steps were.
	aside map[string]bool
}

// scenario is the campaign's scenario for seq, with the follows learned
// for the fields seq sets, under fault when there is one (then judged
// against its fault-free twin rather than a fresh resource).
func (c *campaign) scenario(name string, seq []space.Step, fault *scenario.Fault) *scenario.Scenario {
	var created, changes []space.Step
	for _, st := range seq {
		if st.AtCreation {
			created = append(created, st)
		} else {
			changes = append(changes, st)
		}
	}
	s := c.campaignScenario(name, changes)
	s.Spec.Resource.ConvergeWithin = metav1.Duration{Duration: c.patience()}
	s.Spec.Resource.DeleteWithin = metav1.Duration{Duration: c.deletionPatience()}
	if len(created) > 0 {
		s.Metadata.Description = "explore: " + space.Describe(append(slices.Clone(created), changes...))
		if err := c.createdWith(s, created); err != nil {
			// The run then fails to read its manifest, and says so.
			c.e.Logf("%s: writing its resource with %s: %v", name, space.Describe(created), err)
		}
	}
	fields := space.FieldsOf(seq)
	s.Spec.Assertions.Follows = c.learned.Follows(fields)
	c.e.ExpectRefusal(name, space.SetBy(seq))
	if fault != nil {
		s.Spec.Fault = *fault
		s.Spec.Assertions.SameAsFresh = false
		if fault.Action == scenario.ActionKillAfterWrite || fault.Restart {
			// The fault's own kill.
			s.Spec.Assertions.OperatorRestarts = 1
		}
		s.Metadata.Description += ", under " + fault.Describe()
		if fault.StaleFrom == scenario.StaleFromDeleted {
			s.Spec.Before = []scenario.Action{{Recreate: true}}
			s.Metadata.Description += ", after the resource is deleted and created again"
		}
		if role, ok := c.roles[fault.Target]; ok {
			roles := maps.Clone(s.Spec.Roles)
			if roles == nil {
				roles = map[string]scenario.Role{}
			}
			roles[fault.Target] = role
			s.Spec.Roles = roles
		}
	}
	return s
}

// patience is how long the campaign's next run waits to converge.
func (c *campaign) patience() time.Duration {
	converge, _ := c.e.Slowest()
	return space.Patience(converge, c.base.Spec.Resource.ConvergeWithin.Duration, engine.DefaultConvergeWithin)
}

// deletionPatience is how long the campaign's next run waits for its
// resource to go.
func (c *campaign) deletionPatience() time.Duration {
	_, deletion := c.e.Slowest()
	return space.Patience(deletion, c.base.Spec.Resource.DeleteWithin.Duration, engine.DefaultDeleteWithin)
}

// createdWith makes s create its resource with the steps' values set: a
// manifest of its own, beside which s's file is said to be.
func (c *campaign) createdWith(s *scenario.Scenario, steps []space.Step) error {
	obj, err := c.e.Object(c.base)
	if err != nil {
		return err
	}
	if obj, err = space.WithSteps(obj, steps); err != nil {
		return err
	}
	b, err := sigsyaml.Marshal(obj.Object)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.o.Artifacts, "created", s.Metadata.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s.Spec.Resource.Manifest = "resource.yaml"
	c.e.Set().Files[s.Metadata.Name] = filepath.Join(dir, "scenario.yaml")
	return os.WriteFile(filepath.Join(dir, s.Spec.Resource.Manifest), b, 0o644)
}

// run runs seq (under fault, if any) and learns from the fresh resource
// the differential oracle created with its final spec.
func (c *campaign) run(ctx context.Context, name string, seq []space.Step, fault *scenario.Fault, seed uint64, artifacts string) *report.Result {
	s := c.scenario(name, seq, fault)
	if fault != nil {
		return c.e.Run(ctx, s, seed, artifacts)
	}
	res, fresh := c.e.RunDifferential(ctx, s, seed, artifacts)
	c.learned.Observe(fresh)
	return res
}

// unsettled ends a campaign whose reference run (the starting resource,
// as it is) broke an oracle: that is its one finding, written as a
// scenario file with no step.
func (c *campaign) unsettled(ctx context.Context, ref *report.Result, x *report.Campaign, start time.Time) (*report.Report, *report.Campaign, error) {
	oracle, what, err := c.startFinding(ctx, ref, x, start)
	if err != nil {
		return nil, nil, err
	}
	c.e.Logf("explore: the starting resource, as it is, broke %q: %s", oracle, what)
	x.Took = time.Since(start)
	rep := report.NewReport(c.o.Seed, c.e.Name())
	rep.Results, rep.Campaign = []*report.Result{ref}, x
	return rep, x, c.save(rep, x)
}

// startFinding records what the reference run (the starting resource as
// it is) broke as the campaign's first finding, explore-0, a scenario
// file with no step, and sets the oracles it broke aside for any run
// after it.
func (c *campaign) startFinding(ctx context.Context, ref *report.Result, x *report.Campaign, start time.Time) (oracle, what string, err error) {
	oracle, what = classify(ref, nil)
	if oracle == "" {
		return "", "", fmt.Errorf("the starting resource, created as it is: %s", what)
	}
	f := c.finding(ctx, "explore-0", nil, nil, oracle, what)
	f.After, f.Run = time.Since(start), 1
	x.Findings, x.Runs = append(x.Findings, f), x.Runs+1
	c.aside = map[string]bool{}
	for _, o := range report.BrokenOracles(ref, nil) {
		c.aside[o] = true
	}
	return oracle, what, nil
}

// withoutAside drops the oracles set aside from what a run broke, and
// says whether it dropped any.
func (c *campaign) withoutAside(all []report.Broken) ([]report.Broken, bool) {
	n := len(all)
	all = slices.DeleteFunc(all, func(b report.Broken) bool { return c.aside[b.Oracle] })
	return all, len(all) < n
}

// save writes the campaign's report, explore.json and explore.md.
func (c *campaign) save(rep *report.Report, x *report.Campaign) error {
	x.Causes = report.GroupFindings(x.Findings)
	return errors.Join(htmlreport.Save(rep, c.o.Artifacts), x.Save(c.o.Artifacts),
		os.WriteFile(filepath.Join(c.o.Artifacts, "explore.md"), []byte(x.Summary(c.e.Set().OperatorFile, true)), 0o644))
}

// over says whether the campaign stops before its i-th run: its budget
// spent, its context done, or as many findings as asked for.
func (c *campaign) over(ctx context.Context, start time.Time, x *report.Campaign, i, planned int) bool {
	switch {
	case time.Since(start) > c.o.Budget || ctx.Err() != nil:
		c.e.Logf("explore: the budget of %s is spent after %d of %d runs", c.o.Budget, i, planned)
		return true
	case c.o.MaxFindings > 0 && len(x.Findings) >= c.o.MaxFindings:
		c.e.Logf("explore: %d findings, as many as --max-findings asks, after %d of %d runs", len(x.Findings), i, planned)
		return true
	}
	return false
}

// followUps runs seq again (the plan's i-th, run with no fault from ran
// until it converged) under a kill right after each kind of write it
// made that the reference run never did until it converged
// (faultplan.NewKills), once per field and write: a change an operator
// makes only when asked, cut in the middle. What either wrote while its
// resource was deleted is no change of the spec's.
func (c *campaign) followUps(ctx context.Context, i, planned int, seq []space.Step, ran, converged time.Time, x *report.Campaign, start time.Time) []*report.Result {
	reqs, viewed := c.e.Requests()
	if c.refWrites == nil || !viewed {
		return nil
	}
	if c.followed == nil {
		c.followed = map[string]bool{}
	}
	run, _ := faultplan.Writes(reqs, ran, converged, c.plural)
	var out []*report.Result
	for _, f := range faultplan.NewKills(c.refWrites, run, menuHold) {
		key := strings.Join(space.FieldsOf(seq), ",") + " " + f.Requests.Verb + " " + f.Requests.Resource
		if c.followed[key] {
			continue
		}
		if c.over(ctx, start, x, i+1, planned) {
			break
		}
		c.followed[key] = true
		name := fmt.Sprintf("explore-%d-after-%s-%s", i+1, f.Requests.Verb, f.Requests.Resource)
		out = append(out, c.try(ctx, name, engine.ScenarioSeed(c.o.Seed, i), seq, &f, x, start))
	}
	return out
}

// try runs a sequence as the run name, judges it and, when it broke an
// oracle, shrinks it into a finding of x.
func (c *campaign) try(ctx context.Context, name string, seed uint64, seq []space.Step, fault *scenario.Fault, x *report.Campaign, start time.Time) *report.Result {
	res := c.run(ctx, name, seq, fault, seed, c.o.Artifacts)
	x.Runs++
	if ctx.Err() != nil {
		// Interrupted (the budget's context, a signal): what it saw last
		// is no verdict on the operator.
		c.e.Logf("%s (%s): interrupted, not judged", name, res.Description)
		res.Unjudged = "interrupted (the campaign's budget or a signal): what it saw last is no verdict on the operator"
		return res
	}
	all, what := report.Judge(res, space.SetBy(seq))
	all, aside := c.withoutAside(all)
	switch {
	case len(all) > 0 || res.Verdict() != report.Failed:
	case aside:
		x.Findings[0].Again = append(x.Findings[0].Again, name)
		what = "only what the starting resource broke (explore-0): " + what
	case strings.HasPrefix(what, "refused"):
		res.Refused = what
	default: // not judged: the fault never fired, or only the deletion hung
		res.Unjudged = what
	}
	c.e.Logf("%s (%s): %s", name, res.Description, what)
	b, again := firstNewCause(x.Findings, all, space.Strings(seq), fault)
	switch {
	case b != nil:
		f := c.finding(ctx, name, seq, fault, b.Oracle, b.What)
		f.Where = b.Where
		f.After, f.Run = time.Since(start), x.Runs
		x.Findings = append(x.Findings, f)
	case again >= 0:
		f := &x.Findings[again]
		f.Again = append(f.Again, name)
		c.e.Logf("%s: the cause of %s again (%q), counted there, not shrunk", name, f.Scenario, f.Oracle)
	}
	return res
}

// firstNewCause judges the oracles a run broke, in order, against the
// campaign's findings: each is a cause (an oracle at a place), and the
// first that no finding holds is a new one. When every one is known, it
// returns the index of the finding holding the first (-1 when the run
// broke nothing).
func firstNewCause(findings []report.Finding, all []report.Broken, steps []string, fault *scenario.Fault) (*report.Broken, int) {
	again := -1
	for i := range all {
		run := report.Finding{Oracle: all[i].Oracle, Where: all[i].Where, Shrunk: steps}
		if fault != nil {
			run.FaultAction = fault.Action
		}
		known := slices.IndexFunc(findings, func(f report.Finding) bool { return report.SameCause(f, run) })
		if known < 0 {
			return &all[i], again
		}
		if again < 0 {
			again = known
		}
	}
	return nil, again
}

// finding shrinks a failing sequence to the fewest steps that break the
// same oracle, then leaves its fault out if the oracle breaks without
// it, and writes what is left as a scenario file.
func (c *campaign) finding(ctx context.Context, name string, seq []space.Step, fault *scenario.Fault, oracle, what string) report.Finding {
	e, o := c.e, c.o
	f := report.Finding{Scenario: name, Oracle: oracle, What: what, Steps: space.Strings(seq)}
	n := 0
	fails := func(try []space.Step, fault *scenario.Fault) bool {
		n++
		res := c.run(ctx, fmt.Sprintf("%s-shrink-%d", name, n), try, fault, engine.ScenarioSeed(o.Seed, 0), filepath.Join(o.Artifacts, "shrink"))
		still := slices.Contains(report.BrokenOracles(res, space.SetBy(try)), oracle)
		e.Logf("%s: shrinking, %s: %s", name, c.scenario(name, try, fault).Metadata.Description, map[bool]string{true: "still fails", false: "passes"}[still])
		return still
	}
	shrunk := seq
	if !o.NoShrink {
		if len(seq) > 1 {
			shrunk = space.Shrink(seq, func(try []space.Step) bool { return fails(try, fault) })
		}
		if fault != nil && fails(shrunk, nil) {
			fault = nil
		}
	}
	f.Shrunk, f.Fields = space.Strings(shrunk), space.SetBy(shrunk)
	if fault != nil {
		f.Fault, f.FaultAction = fault.Describe(), fault.Action
	}
	s := c.scenario(name, shrunk, fault)
	s.Spec.Resource.ConvergeWithin = c.base.Spec.Resource.ConvergeWithin
	s.Spec.Resource.DeleteWithin = c.base.Spec.Resource.DeleteWithin
	file, err := c.writeFinding(o.Artifacts, s, oracle, what)
	if err != nil {
		f.File = "not written: " + err.Error()
		return f
	}
	f.File = file
	steps := "shrunk to " + space.Describe(shrunk)
	if len(shrunk) == 0 {
		steps = "no step, the starting resource as it is"
	}
	e.Logf("%s: FINDING (%s), %s: %s", name, oracle, steps, file)
	return f
}

// campaignStableFor is the stillness window of a campaign's runs when the
// base scenario gives none: shorter than a scenario's default, since a
// campaign makes hundreds of runs and a write loop shows within seconds.
const campaignStableFor = 5 * time.Second

// campaignStillness is how long a campaign's resource must stay still to
// be settled (the base's stableFor, else campaignStableFor), and how long
// its operator must ask nothing for a hold to end early.
func campaignStillness(base *scenario.Scenario) time.Duration {
	if st := base.Spec.Assertions.StableFor; st != nil {
		return st.Duration
	}
	return campaignStableFor
}

// campaignScenario is the campaign's base scenario with the sequence's steps as its
// actions, each but the last followed by a wait to converge, no fault,
// and the automatic oracles as its assertions. On a cluster an etcd-kv
// workload (the ledger) is kept, so that no run may lose an acknowledged
// write or leave a history that is not linearizable; a command workload
// is the base scenario's own check of its fault, and goes.
func (c *campaign) campaignScenario(name string, seq []space.Step) *scenario.Scenario {
	base := c.base
	s := *base
	s.Metadata = scenario.Metadata{Name: name, Description: "explore: " + space.Describe(seq)}
	if len(seq) == 0 {
		s.Metadata.Description = "explore: the starting resource, as it is, with no step"
	}
	s.Spec.Before = nil
	if w := s.Spec.Workload; c.e.OnEnvtest() || w == nil || w.Kind != scenario.WorkloadEtcdKV {
		s.Spec.Workload = nil
	}
	s.Spec.During = nil
	for i, st := range seq {
		if i > 0 {
			s.Spec.During = append(s.Spec.During, scenario.Action{Converge: true})
		}
		s.Spec.During = append(s.Spec.During, scenario.Action{Patch: st.Patch()})
	}
	s.Spec.Fault = scenario.Fault{Action: scenario.ActionNone, Hold: metav1.Duration{Duration: time.Second}}
	stable := metav1.Duration{Duration: campaignStillness(base)}
	s.Spec.Assertions = scenario.Assertions{StableFor: &stable, SameAsFresh: true, TruthfulStatus: true, ChangesShow: true}
	c.e.Set().Files[name] = c.e.Set().Files[base.Metadata.Name]
	return &s
}
