package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos"
	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/workload"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
	"github.com/gauntlet-dev/gauntlet/suites/framework"
)

// RunOptions select and shape a chaos run.
type RunOptions struct {
	// Seed drives every choice; each scenario's seed is derived from it and
	// its position, and printed, so `-seed` replays the run.
	Seed uint64
	// Match selects scenarios by name (all when nil).
	Match *regexp.Regexp
	// Seeds pins the seed of the named scenarios (a replay of a recorded
	// run); the others derive theirs from Seed.
	Seeds map[string]uint64
	// Budgets are the scenarios' budgets.
	Budgets *chaos.Budgets
	// Artifacts is the folder for the report and each scenario's evidence.
	Artifacts string
	// Workload shapes the load (clients, keys, pace).
	Workload workload.Config
	// Converge bounds the wait for the cluster to converge after the heal.
	Converge time.Duration
}

// writeStall is the shortest stretch without an acknowledged write that
// counts as writes having stopped: four clients acknowledge a write every
// few tens of milliseconds when the cluster is healthy.
const writeStall = time.Second

var dbGVR = schema.GroupVersionResource{Group: dbv1.GroupVersion.Group, Version: dbv1.GroupVersion.Version, Resource: "databaseclusters"}

// ScenarioSeed derives the seed of the i-th scenario from the run's.
func ScenarioSeed(seed uint64, i int) uint64 { return seed*1_000_003 + uint64(i) }

// RunAll runs every selected scenario in turn and returns the report; it
// writes report.json, junit.xml, summary.md and report.html to o.Artifacts
// after each scenario.
func (e *Env) RunAll(ctx context.Context, o RunOptions) (*chaos.Report, error) {
	rep := chaos.NewReport(o.Seed, e.Cluster.Name)
	for i, s := range Scenarios {
		if o.Match != nil && !o.Match.MatchString(s.Name) {
			continue
		}
		seed, pinned := o.Seeds[s.Name]
		if !pinned {
			seed = ScenarioSeed(o.Seed, i)
		}
		res := e.RunScenario(ctx, s, seed, o)
		rep.Results = append(rep.Results, res)
		e.progress("%s: %s in %s", s.Name, res.Verdict(), res.Took.Round(time.Second))
		if err := WriteReport(rep, o.Artifacts); err != nil {
			return rep, err
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, WriteReport(rep, o.Artifacts)
}

// WriteReport writes report.json, junit.xml, summary.md and report.html.
func WriteReport(rep *chaos.Report, dir string) error {
	if err := rep.Write(dir); err != nil {
		return err
	}
	_, err := htmlreport.Write(rep, dir)
	return err
}

// RunScenario runs one scenario on a fresh cluster: the workload runs from
// before the injection until after convergence; the condition timeline is
// recorded from watch events; the operator's metrics are read before and
// after; then the ledger is checked and everything is judged. A failed
// scenario leaves a bundle and the history in its artifacts folder.
func (e *Env) RunScenario(ctx context.Context, s Scenario, seed uint64, o RunOptions) *chaos.Result {
	start := time.Now()
	budget := o.Budgets.For(s.Name)
	res := &chaos.Result{Run: &chaos.Run{Scenario: s.Name, Seed: seed}, Budget: budget,
		Artifacts: filepath.Join(o.Artifacts, s.Name)}
	defer func() { res.Took = time.Since(start) }()
	fail := func(format string, args ...any) *chaos.Result {
		res.Errors = append(res.Errors, fmt.Sprintf(format, args...))
		return res
	}
	if o.Converge == 0 {
		o.Converge = 5 * time.Minute
	}

	if why := e.Runner.Missing(ctx, s.Needs); why != "" {
		res.Skipped = why
		e.progress("%s: skipped before creating a cluster: %s", s.Name, why)
		return res
	}
	image := e.EtcdImage
	if s.OldImage {
		image = e.EtcdUpgradeFrom
	}
	c, err := e.NewCase(ctx, s.Name, image)
	if c != nil {
		defer e.finish(ctx, c, res)
	}
	if err != nil {
		return fail("creating the cluster: %v", err)
	}
	e.progress("%s: cluster %s/%s converged in %s", s.Name, c.Namespace, c.Cluster.Name, time.Since(start).Round(time.Second))

	before, err := e.operatorState(ctx)
	if err != nil {
		return fail("reading the operator before the fault: %v", err)
	}
	tctx, stopTimeline := context.WithCancel(ctx)
	defer stopTimeline()
	timeline := chaos.WatchConditions(tctx, e.Dynamic, dbGVR, c.Namespace, c.Cluster.Name)
	wl := o.Workload
	wl.Seed = seed
	wl.Prefix = "gauntlet/chaos/" + s.Name + "/"
	load := workload.Start(ctx, workload.EtcdKV{Client: c.Etcd}, wl)
	// A healthy baseline before the fault: the first acknowledged writes.
	if err := framework.PollFor(ctx, "the workload's first acknowledged writes", time.Minute, 100*time.Millisecond, func(context.Context) (bool, string, error) {
		n := 0
		var last string
		for _, op := range load.Snapshot() {
			if op.Kind == workload.KindPut && op.Outcome == workload.OK {
				n++
			}
			last = op.Error
		}
		return n >= 20, fmt.Sprintf("%d acknowledged writes, last error %q", n, last), nil
	}); err != nil {
		load.Stop()
		return fail("%v", err)
	}

	obs := &chaos.Observer{Scrape: e.ScrapeOperator, Controller: operator.ControllerName, Pods: c.watchedPods}
	obs.Start(ctx)
	rng := rand.New(rand.NewPCG(seed, 1))
	run := e.Runner.Run(ctx, chaos.Scenario{
		Name: s.Name,
		Hold: s.Hold,
		Fault: func(ctx context.Context, r *rand.Rand) (*chaos.Experiment, error) {
			return s.Fault(ctx, c, r)
		},
		During: func(ctx context.Context) error {
			if s.During == nil {
				return nil
			}
			return s.During(ctx, c, rng)
		},
		Converged: func(ctx context.Context) error { return c.WaitConverged(ctx, o.Converge) },
	}, seed)
	res.Run = run
	ledger := load.Stop()
	stopTimeline()
	res.Timeline = timeline.Samples()
	res.Series = &chaos.Series{}
	res.Series.SetWorkload(ledger)
	res.Series.Operator, res.Series.Pods = obs.Stop()
	for _, err := range timeline.Errors() {
		// Figures read from a timeline with gaps would be guesses.
		res.Errors = append(res.Errors, "the condition timeline is incomplete: its watch failed: "+err)
	}
	if run.Skipped != "" || run.Failed() {
		_, _ = ledger.Save(res.Artifacts)
		return res
	}

	// The data: every acknowledged write reads back at its revision, and
	// the history is linearizable.
	f := &res.Figures
	counts := ledger.Counts()
	f.AckedWrites, f.AmbiguousWrites = counts.AckedWrites, counts.AmbiguousWrites
	vctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	_, lost, err := ledger.VerifyDurability(vctx, workload.EtcdKV{Client: c.Etcd})
	cancel()
	if err != nil {
		return fail("reading back the acknowledged writes: %v", err)
	}
	f.WritesLost = len(lost)
	for _, l := range lost {
		res.Violations = append(res.Violations, fmt.Sprintf("lost write %s=%s (revision %d): %s", l.Op.Key, l.Op.Value, l.Op.Revision, l.Reason))
	}
	lin, err := ledger.CheckLinearizable(time.Minute, res.Artifacts)
	if err != nil {
		return fail("checking linearizability: %v", err)
	}
	f.Linearizable, f.Operations = string(lin.Result), lin.Operations

	// The conditions, from the timeline.
	// Times count from the chaos object's creation: the fault may act
	// before Chaos Mesh reports it injected.
	inj, healed := run.Phases.Requested, run.Phases.Healed
	f.TimeToDegraded, f.TimeToAvailable = -1, -1
	if t, ok := timeline.First(string(dbv1.ConditionDegraded), "True", inj); ok {
		f.TimeToDegraded = t.Sub(inj)
	}
	if t, ok := timeline.First(string(dbv1.ConditionAvailable), "True", healed); ok {
		f.TimeToAvailable = t.Sub(healed)
	}
	f.AvailableFalse = timeline.Ever(string(dbv1.ConditionAvailable), "False", inj, healed)
	// Writes resume at the end of the longest stretch without an
	// acknowledged write, between the fault's request and convergence;
	// a stretch shorter than writeStall is the workload's own pace, not an
	// outage, and counts as writes never having stopped.
	gap, resumed := ledger.LongestWriteGap(inj.Sub(ledger.Start), run.Phases.Converged.Sub(ledger.Start))
	f.LongestWriteGap = gap
	if gap >= writeStall {
		f.WritesResumeAfter = resumed - inj.Sub(ledger.Start)
	}

	// The operator: restarts, metric deltas, a drained queue, and owned
	// objects left alone once converged.
	after, err := e.operatorSettled(ctx)
	if err != nil {
		return fail("reading the operator after the heal: %v", err)
	}
	f.OperatorRestarts = restarts(before, after)
	if f.OperatorRestarts == 0 {
		f.PanicsDelta = after.metrics.Panics - before.metrics.Panics
		f.ErrorsDelta = after.metrics.Errors - before.metrics.Errors
	} else {
		// Counters restart with the process: count what the new one saw.
		f.PanicsDelta, f.ErrorsDelta = after.metrics.Panics, after.metrics.Errors
	}
	f.WorkqueueDepth = after.metrics.WorkqueueDepth
	if f.UnstableObjects, err = c.Unstable(ctx, 10*time.Second); err != nil {
		return fail("watching owned objects after convergence: %v", err)
	}
	res.Violations = append(res.Violations, chaos.Judge(*f, budget)...)
	if len(res.Violations) > 0 {
		_, _ = ledger.Save(res.Artifacts)
	}
	e.progress("%s: %s", s.Name, f)
	return res
}

// finish collects a bundle when the scenario failed, then deletes the
// cluster and its namespace.
func (e *Env) finish(ctx context.Context, c *Case, res *chaos.Result) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*time.Minute)
	defer cancel()
	c.Close()
	if res.Verdict() == chaos.Failed {
		_ = os.MkdirAll(res.Artifacts, 0o755)
		if err := framework.CollectBundle(ctx, res.Artifacts, framework.BundleOptions{
			Config: e.Config, Namespaces: []string{c.Namespace, e2e.OperatorNamespace, e.Runner.ChaosNamespace}, Cluster: e.Cluster,
		}); err != nil {
			e.progress("%s: bundle incomplete: %v", res.Scenario, err)
		}
	}
	_ = e.Client.Delete(ctx, c.Cluster)
	err := framework.PollFor(ctx, "cluster "+c.Namespace+"/"+c.Cluster.Name+" to be deleted", 3*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(c.Cluster), &dbv1.DatabaseCluster{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err), nil
	})
	if err != nil {
		res.Errors = append(res.Errors, "cleanup: "+err.Error())
	}
	_ = e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}})
}

// operatorState is the operator's pod identity, restart count and metrics.
type operatorState struct {
	uid      string
	restarts int32
	metrics  chaos.ControllerMetrics
}

func (e *Env) operatorState(ctx context.Context) (operatorState, error) {
	p, err := e.OperatorPod(ctx)
	if err != nil {
		return operatorState{}, err
	}
	s := operatorState{uid: string(p.UID)}
	for _, cs := range p.Status.ContainerStatuses {
		s.restarts += cs.RestartCount
	}
	fams, err := e.ScrapeOperator(ctx)
	if err != nil {
		return s, err
	}
	s.metrics = chaos.ReadControllerMetrics(fams, operator.ControllerName)
	return s, nil
}

// operatorSettled waits until the operator's workqueue is empty and reads
// its state; on timeout it returns the last state it read.
func (e *Env) operatorSettled(ctx context.Context) (operatorState, error) {
	var s operatorState
	err := framework.PollFor(ctx, "the operator's workqueue to drain", time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		var err error
		if s, err = e.operatorState(ctx); err != nil {
			return false, err.Error(), nil
		}
		return s.metrics.WorkqueueDepth == 0, fmt.Sprintf("workqueue depth %v", s.metrics.WorkqueueDepth), nil
	})
	if s.uid == "" {
		return s, err
	}
	return s, nil
}

func restarts(before, after operatorState) int {
	if before.uid != after.uid {
		return 1 + int(after.restarts)
	}
	return int(after.restarts - before.restarts)
}
