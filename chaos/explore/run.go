package explore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
	"github.com/gauntlet-dev/gauntlet/chaos/faultplan"
	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// Options shape a campaign of `gauntlet explore`.
type Options struct {
	// Base names the scenario the campaign starts from: its resource, its
	// converged expressions and its variables (default: the set's first).
	Base string
	// Seed fixes the plan and every run's seed; it replays the campaign.
	Seed uint64
	// Sequences is how many multi-step sequences follow the single steps
	// (default 10); MaxSteps bounds their length (default 3).
	Sequences, MaxSteps int
	// Budget stops starting new runs once spent (default 30m).
	Budget time.Duration
	// NoShrink writes failing sequences as they are.
	NoShrink bool
	// MaxFindings ends the campaign once it has found so many (0: no
	// limit).
	MaxFindings int
	// NoFaults runs every sequence without a fault (by default the seed
	// holds a fault, learned from the reference run, over half of them).
	NoFaults bool
	// SkipFields are spec fields (spec.a.b, and everything under them)
	// the campaign leaves alone: values this environment cannot run
	// (a final snapshot on envtest, where nothing runs in pods).
	SkipFields []string
	// Shard and Shards split the plan: this campaign runs the plan's
	// sequences i with i mod Shards == Shard, the rest going to its
	// siblings (same seed, same plan, same faults), whose campaigns
	// report.MergeCampaigns joins. Shards 0 or 1 runs the whole plan.
	Shard, Shards int
	// Artifacts is the campaign's folder.
	Artifacts string
}

// Run runs a campaign on the engine's operator: single steps and
// sequences of spec changes generated from the CRD's schema, each judged
// by the automatic oracles (it settles; it stays settled; it ends as a
// fresh resource with its final spec does). A failing sequence is shrunk
// and written as a scenario file under Artifacts/findings.
func Run(ctx context.Context, e Engine, o Options) (*report.Report, *report.Campaign, error) {
	start := time.Now()
	o = defaults(o)
	base, err := baseScenario(e.Set(), o.Base)
	if err != nil {
		return nil, nil, err
	}
	obj, err := e.Object(base)
	if err != nil {
		return nil, nil, err
	}
	versions, err := e.ServedVersions(ctx, obj)
	if err != nil {
		return nil, nil, err
	}
	x := &report.Campaign{Base: base.Metadata.Name, Seed: o.Seed, OnCluster: !e.OnEnvtest(), Set: setVariables(e.Overrides())}
	if o.Shards > 1 {
		x.Shard = fmt.Sprintf("%d/%d", o.Shard, o.Shards)
	}
	steps, err := generate(x, versions[0].Spec, obj, o.SkipFields)
	if err != nil {
		return nil, nil, fmt.Errorf("the %s CRD's schema of spec (version %s): %w", obj.GetKind(), versions[0].Name, err)
	}
	allowed, err := admitted(ctx, e, base, obj, steps, versions, x)
	if err != nil {
		return nil, nil, err
	}
	refused := x.Refused
	plan := space.Plan(allowed, o.Seed, o.Sequences, o.MaxSteps, obj.Object)
	e.Logf("explore: %d fields of %s (%d skipped), %d values tried alone, %d refused by the API server; %d runs planned",
		len(x.Fields), obj.GetKind(), len(x.Skipped), len(allowed), len(refused), len(plan))

	c := &campaign{e: e, o: o, base: base}
	// A fault's hold ends once the operator is still: hundreds of runs
	// would otherwise wait out holds sized for its busiest step.
	e.EndHoldsWhenStill(campaignStillness(base))
	defer e.EndHoldsWhenStill(0)
	refStart := time.Now()
	refRes, ref, err := e.ReferenceRun(ctx, base, o.Seed, o.Artifacts)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case ctx.Err() != nil:
		// Interrupted: what the reference run saw last is no verdict.
		return nil, nil, fmt.Errorf("the reference run: %w", ctx.Err())
	case ref == nil:
		// The operator cannot settle the starting resource itself: the
		// first finding, and the campaign has nothing to start from.
		return c.unsettled(ctx, refRes, x, start)
	case refRes.Verdict() != report.Passed:
		if err := c.goOnPast(ctx, refRes, x, start); err != nil {
			return nil, nil, err
		}
	}
	c.learned.Observe(ref)
	c.logPatience()
	var faults []*scenario.Fault
	if !o.NoFaults {
		menu := c.learnFaults(refStart, refRes.Phases.Converged, ref)
		sweep, swept := faultplan.Sweep(allowed, menu, o.Seed, ref.Plural, obj.Object)
		plan, faults = faultplan.Alternate(sweep, swept, plan, faultplan.For(plan, menu, o.Seed))
		e.Logf("explore: %d faults learned from the reference run, each held once early (every other run) while one value changes, then over half the sequences", len(menu))
	}

	rep := report.NewReport(o.Seed, e.Name())
	rep.Results = c.startResults(refRes, x)
	steps, err = c.runPlan(ctx, plan, faults, x, rep, start)
	if err != nil {
		return rep, x, err
	}
	for _, f := range c.learned.Follows(x.Fields) {
		x.Follows = append(x.Follows, fmt.Sprintf("%s → %s %s", f.Field, f.Object, f.Path))
	}
	x.Covered = slices.Sorted(maps.Keys(x.CoveredAfter))
	x.Took = time.Since(start)
	x.StepsPerMinute = float64(len(steps)) / x.Took.Minutes()
	rep.Campaign = x
	return rep, x, c.save(rep, x)
}

// goOnPast records what a reference run that settled broke at its
// deletion (judged once its end state was read) as the first finding,
// and sets that oracle aside, so that every run's deletion does not find
// it again.
func (c *campaign) goOnPast(ctx context.Context, ref *report.Result, x *report.Campaign, start time.Time) error {
	oracle, what, err := c.startFinding(ctx, ref, x, start)
	if err == nil {
		c.e.Logf("explore: the starting resource, as it is, broke %q: %s; the campaign goes on with it set aside", oracle, what)
	}
	return err
}

// startResults are the results a campaign's report starts with: the
// reference run's when it is the first finding (what explore-0 broke).
func (c *campaign) startResults(ref *report.Result, x *report.Campaign) []*report.Result {
	if len(x.Findings) > 0 {
		return []*report.Result{ref}
	}
	return nil
}

// logPatience says how long a run waits, as the reference run set it.
func (c *campaign) logPatience() {
	converge, deletion := c.e.Slowest()
	c.e.Logf("explore: a run waits %s at most to converge and %s for its resource to go (%d times the slowest so far, %s and %s, at least %s, at most the base's bounds, which a finding's file keeps)",
		c.patience(), c.deletionPatience(), space.PatienceFactor, converge.Round(time.Millisecond), deletion.Round(time.Millisecond), space.PatienceFloor)
}

// runPlan runs the shard's sequences of the plan until the budget is
// spent, each under its fault (if any), noting when each field was first
// changed, and returns the steps it ran.
func (c *campaign) runPlan(ctx context.Context, plan [][]space.Step, faults []*scenario.Fault, x *report.Campaign, rep *report.Report, start time.Time) ([]space.Step, error) {
	var steps []space.Step
	x.CoveredAfter = map[string]time.Duration{}
	for i, seq := range plan {
		if !c.o.mine(i) {
			continue
		}
		if c.over(ctx, start, x, i, len(plan)) {
			break
		}
		var fault *scenario.Fault
		if faults != nil {
			fault = faults[i]
		}
		ran := time.Now()
		res := c.try(ctx, fmt.Sprintf("explore-%d", i+1), engine.ScenarioSeed(c.o.Seed, i), seq, fault, x, start)
		rep.Results = append(rep.Results, res)
		if fault == nil && !res.Phases.Converged.IsZero() {
			rep.Results = append(rep.Results, c.followUps(ctx, i, len(plan), seq, ran, res.Phases.Converged, x, start)...)
		}
		steps = append(steps, seq...)
		for _, st := range seq {
			if st.Undo || st.Unset {
				continue // sets a field back, or removes one: no value of a field
			}
			if _, ok := x.CoveredAfter[st.Field()]; !ok {
				x.CoveredAfter[st.Field()] = time.Since(start)
			}
		}
		if x.AllCoveredAfter == 0 && len(x.CoveredAfter) == len(x.Fields) {
			x.AllCoveredAfter = time.Since(start)
		}
		if err := htmlreport.Save(rep, c.o.Artifacts); err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// generate lists the steps to try: for each field of the spec's schema
// the campaign does not skip, each candidate value, inside new parents
// where obj lacks them and with the switches it waits for on; then each
// optional part of obj's spec unset.
func generate(x *report.Campaign, specSchema *apiextensionsv1.JSONSchemaProps, obj *unstructured.Unstructured, skip []string) ([]space.Step, error) {
	fields, skipped := space.Fields(specSchema)
	x.Skipped = skipped
	var steps []space.Step
	for _, f := range fields {
		if skipField(skip, f.String()) {
			x.Skipped = append(x.Skipped, f.String()+" (--skip-field)")
			continue
		}
		x.Fields = append(x.Fields, f.String())
		cur, _, _ := unstructured.NestedFieldNoCopy(obj.Object, f.Path...)
		missing := missingParents(obj, f.Path)
		steps = append(steps, space.Steps(specSchema, f, cur, missing, obj.Object)...)
	}
	for _, st := range space.Removals(specSchema, obj.Object) {
		if !skipField(skip, st.Field()) {
			steps = append(steps, st)
		}
	}
	if len(x.Fields) == 0 {
		return nil, fmt.Errorf("no field to set (%s): a spec with x-kubernetes-preserve-unknown-fields and no properties has no structure to generate from",
			strings.Join(x.Skipped, "; "))
	}
	return steps, nil
}

// mine says whether the plan's i-th sequence is this shard's.
func (o Options) mine(i int) bool {
	return o.Shards <= 1 || i%o.Shards == o.Shard
}

// defaultExploreBudget is a campaign's budget when none is given: the
// time the bug benchmark allows a campaign to find a bug in.
const defaultExploreBudget = 30 * time.Minute

func defaults(o Options) Options {
	if o.Sequences == 0 {
		o.Sequences = 10
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 3
	}
	if o.Budget == 0 {
		o.Budget = defaultExploreBudget
	}
	return o
}

// baseScenario is the set's scenario named (or the first).
func baseScenario(set *scenario.Set, name string) (*scenario.Scenario, error) {
	for _, s := range set.Scenarios {
		if name == "" || s.Metadata.Name == name {
			return s, nil
		}
	}
	if name == "" {
		return nil, fmt.Errorf("explore starts from a scenario's resource: %s has no Scenario file", set.OperatorFile)
	}
	return nil, fmt.Errorf("--base %q: no such scenario", name)
}

// classify is the first oracle a run broke, with the refusal oracle for
// the fields its steps set (report.Oracle).
func classify(res *report.Result, seq []space.Step) (oracle, what string) {
	return report.Oracle(res, space.SetBy(seq))
}

// missingParents counts the objects on path (spec and the field itself
// aside) that obj lacks: from the first one missing, all are.
func missingParents(obj *unstructured.Unstructured, path []string) int {
	for i := 2; i < len(path); i++ {
		if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, path[:i]...); !found {
			return len(path) - i
		}
	}
	return 0
}

// skipField says whether field is one of skip or under one.
func skipField(skip []string, field string) bool {
	return slices.ContainsFunc(skip, func(s string) bool { return field == s || strings.HasPrefix(field, s+".") })
}
