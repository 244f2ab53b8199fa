package explore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
	"github.com/gauntlet-dev/gauntlet/chaos/faultplan"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// fakeEngine is an engine that runs nothing: enough for what a campaign
// makes of its base scenario, its faults and its findings.
type fakeEngine struct {
	set                *scenario.Set
	envtest            bool
	converge, deletion time.Duration
	refusable          map[string][]string
}

func (f *fakeEngine) Name() string                 { return "fake" }
func (f *fakeEngine) Logf(string, ...any)          {}
func (f *fakeEngine) Set() *scenario.Set           { return f.set }
func (f *fakeEngine) Overrides() map[string]string { return map[string]string{"B": "2", "A": "1"} }
func (f *fakeEngine) OnEnvtest() bool              { return f.envtest }
func (f *fakeEngine) Object(s *scenario.Scenario) (*unstructured.Unstructured, error) {
	return render.Resource(f.set, s, render.Vars{Overrides: f.Overrides(), Defaults: s.Spec.Variables})
}
func (f *fakeEngine) ServedVersions(context.Context, *unstructured.Unstructured) ([]engine.ServedVersion, error) {
	return nil, errors.New("the fake engine serves no CRD")
}
func (f *fakeEngine) Scratch(context.Context, *scenario.Scenario) (*engine.Scratch, error) {
	return nil, errors.New("the fake engine creates nothing")
}
func (f *fakeEngine) Run(_ context.Context, s *scenario.Scenario, _ uint64, _ string) *report.Result {
	return &report.Result{Run: &report.Run{Scenario: s.Metadata.Name, Errors: []string{"the fake engine runs nothing"}}}
}
func (f *fakeEngine) RunDifferential(ctx context.Context, s *scenario.Scenario, seed uint64, dir string) (*report.Result, *compare.State) {
	return f.Run(ctx, s, seed, dir), nil
}
func (f *fakeEngine) ReferenceRun(ctx context.Context, s *scenario.Scenario, seed uint64, dir string) (*report.Result, *compare.State, error) {
	return f.Run(ctx, s, seed, dir), nil, nil
}
func (f *fakeEngine) ExpectRefusal(name string, fields []string) {
	if f.refusable == nil {
		f.refusable = map[string][]string{}
	}
	f.refusable[name] = fields
}
func (f *fakeEngine) EndHoldsWhenStill(time.Duration)             {}
func (f *fakeEngine) Slowest() (converge, deletion time.Duration) { return f.converge, f.deletion }
func (f *fakeEngine) Requests() ([]apiproxy.Request, bool)        { return nil, false }

// exploreCampaign is a campaign of the reference operator's test files,
// from their first scenario, on an engine that runs nothing.
func exploreCampaign(t *testing.T) (*campaign, *fakeEngine) {
	t.Helper()
	set, err := scenario.LoadPaths("../scenario/testdata/reference")
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEngine{set: set}
	return &campaign{e: e, base: set.Scenarios[0]}, e
}

// A campaign's run is the base scenario with its steps as patches, a wait
// to converge between two, no fault, and the automatic oracles.
func TestCampaignScenario(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	base := c.base
	seq := []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(5)}, {Path: []string{"spec", "deletionPolicy"}, Value: "Delete"}}
	s := c.campaignScenario("explore-3", seq)
	g.Expect(s.Metadata.Name).To(Equal("explore-3"))
	g.Expect(s.Spec.Resource).To(Equal(base.Spec.Resource), "the base's resource and convergence")
	g.Expect(s.Spec.During).To(Equal([]scenario.Action{
		{Patch: map[string]any{"spec": map[string]any{"replicas": int64(5)}}},
		{Converge: true},
		{Patch: map[string]any{"spec": map[string]any{"deletionPolicy": "Delete"}}},
	}))
	g.Expect(s.Spec.Fault).To(Equal(scenario.Fault{Action: scenario.ActionNone, Hold: metav1.Duration{Duration: time.Second}}))
	g.Expect(s.Spec.Assertions.SameAsFresh).To(BeTrue())
	g.Expect(s.Spec.Assertions.StableFor).NotTo(BeNil())
	g.Expect(e.Set().Files["explore-3"]).To(Equal(e.Set().Files[base.Metadata.Name]), "its manifest is found beside the base's")
	g.Expect(base.Spec.During).NotTo(Equal(s.Spec.During), "the base is left as it was")
}

// On a cluster a campaign's runs keep the base's ledger (an etcd-kv
// workload): no acknowledged write lost, a linearizable history. A
// command workload, and any workload on envtest, goes.
func TestCampaignScenarioKeepsTheLedger(t *testing.T) {
	c, e := exploreCampaign(t)
	base := c.base
	ledger := &scenario.Workload{Kind: scenario.WorkloadEtcdKV, Endpoints: &scenario.Endpoints{Role: "members", Port: 2379}}
	command := &scenario.Workload{Kind: scenario.WorkloadCommand, Command: &scenario.Command{Role: "members"}}
	for _, tc := range []struct {
		name    string
		w       *scenario.Workload
		envtest bool
		kept    bool
	}{
		{"ledger on a cluster", ledger, false, true},
		{"ledger on envtest", ledger, true, false},
		{"command on a cluster", command, false, false},
		{"none", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := *base
			b.Spec.Workload = tc.w
			e.envtest = tc.envtest
			s := (&campaign{e: e, base: &b}).campaignScenario("explore-1", []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(5)}})
			if got := s.Spec.Workload != nil; got != tc.kept {
				t.Errorf("workload kept: %v, want %v", got, tc.kept)
			}
			if s.Spec.Assertions.Workload != nil {
				t.Errorf("workload assertions %+v; the base's bounds on its fault do not judge a spec change", s.Spec.Assertions.Workload)
			}
		})
	}
}

// The finding's file is a scenario file gauntlet run loads as it is.
func TestWriteFindingLoads(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	dir := t.TempDir()
	s := c.campaignScenario("explore-7", []space.Step{
		{Path: []string{"spec", "replicas"}, Value: int64(9)}, {Path: []string{"spec", "image"}, Value: "x"}})
	follow := scenario.Follow{Field: "spec.image", Object: "StatefulSet/demo", Path: "spec.template.spec.containers[0].image"}
	s.Spec.Assertions.Follows = []scenario.Follow{follow}
	file, err := c.writeFinding(dir, s, "differential", "differs")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(file).To(Equal(filepath.Join(dir, "findings", "explore-7.yaml")))
	_, err = os.Stat(filepath.Join(dir, "findings", "explore-7-resource.yaml"))
	g.Expect(err).NotTo(HaveOccurred(), "the base resource's manifest beside it")
	set, err := scenario.LoadPaths(e.Set().OperatorFile, file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Scenarios).To(HaveLen(1))
	g.Expect(set.Scenarios[0].Spec.During).To(Equal([]scenario.Action{
		{Patch: map[string]any{"spec": map[string]any{"replicas": float64(9)}}}, {Converge: true},
		{Patch: map[string]any{"spec": map[string]any{"image": "x"}}}}), "as JSON reads it")
	b, _ := os.ReadFile(file)
	t.Logf("%s", b)
	g.Expect(set.Scenarios[0].Spec.Assertions.SameAsFresh).To(BeTrue())
	g.Expect(set.Scenarios[0].Spec.Assertions.Follows).To(Equal([]scenario.Follow{follow}), "the consistency oracle's follows replay")

	// The starting resource as it is: no steps, no during block.
	file, err = c.writeFinding(dir, c.campaignScenario("explore-0", nil), "settles", "gave up")
	g.Expect(err).NotTo(HaveOccurred())
	b, _ = os.ReadFile(file)
	g.Expect(string(b)).NotTo(ContainSubstring("during:"))
}

func TestSkipField(t *testing.T) {
	g := NewWithT(t)
	skip := []string{"spec.backup", "spec.deletionPolicy"}
	g.Expect(skipField(skip, "spec.backup.schedule")).To(BeTrue())
	g.Expect(skipField(skip, "spec.deletionPolicy")).To(BeTrue())
	g.Expect(skipField(skip, "spec.backupX")).To(BeFalse())
	g.Expect(skipField(skip, "spec.replicas")).To(BeFalse())
}

// A spec the operator cannot run, refused in a condition that names the
// field, is the refusal oracle's pass; a silent stall is a finding.
func TestClassifyRefusal(t *testing.T) {
	g := NewWithT(t)
	seq := []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(1)}, {Path: []string{"spec", "image"}, Value: "x"}}
	stall := func(message string) *report.Result {
		return &report.Result{Run: &report.Run{Errors: []string{`not converged after the heal: waiting for db to converge: gave up`}},
			Conditions: []report.Condition{{Type: "Available", Status: "True", Reason: "Quorum", Message: "3 of 3 members ready"},
				{Type: "Progressing", Status: "True", Reason: "WaitingForQuorum", Message: message}}}
	}
	oracle, what := classify(stall("rolling update (to the new spec.image or spec.resources) paused: set spec.replicas to 3 or more"), seq)
	g.Expect(oracle).To(BeEmpty())
	g.Expect(what).To(HavePrefix("refused by the operator, in its Progressing condition (True): rolling update"))
	oracle, _ = classify(stall("rolling update paused: scale to 3 or more members"), seq)
	g.Expect(oracle).To(Equal("settles"), "the expression names spec.replicas, no condition does")
}

// A sequence under a fault is judged against its fault-free twin, with a
// role for the operator; its finding file loads with the fault as written.
func TestCampaignUnderFault(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	base := c.base
	c = &campaign{e: e, base: base, roles: map[string]scenario.Role{faultplan.Operator: {Operator: true}}}
	seq := []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(5)}, {Path: []string{"spec", "image"}, Value: "x"}}
	fault := &scenario.Fault{Action: scenario.ActionKillAfterWrite, Target: faultplan.Operator, After: 1, Hold: metav1.Duration{Duration: 15 * time.Second},
		Requests: &scenario.RequestMatch{Verb: "patch", Resource: "statefulsets"}}
	s := c.scenario("explore-4", seq, fault)
	g.Expect(s.Spec.Assertions.SameAsFresh).To(BeFalse(), "a view fault's run is compared with its twin")
	g.Expect(s.Spec.Assertions.TruthfulStatus).To(BeTrue())
	g.Expect(s.Spec.Roles[faultplan.Operator]).To(Equal(scenario.Role{Operator: true}))
	g.Expect(base.Spec.Roles).NotTo(HaveKey(faultplan.Operator), "the base is left as it was")
	g.Expect(s.Metadata.Description).To(HaveSuffix(", under kill-after-write on operator"))
	g.Expect(s.Spec.Assertions.OperatorRestarts).To(Equal(1), "the fault's own kill")

	file, err := c.writeFinding(t.TempDir(), s, "twin: end state equals the fault-free twin's", "differs")
	g.Expect(err).NotTo(HaveOccurred())
	b, _ := os.ReadFile(file)
	g.Expect(string(b)).NotTo(MatchRegexp(`\b0s`), "unset durations are left out")
	set, err := scenario.LoadPaths(e.Set().OperatorFile, file)
	g.Expect(err).NotTo(HaveOccurred(), "%s", b)
	got := set.Scenarios[0].Spec
	g.Expect(got.Fault).To(Equal(*fault))
	g.Expect(got.Assertions.SameAsFresh).To(BeFalse())
	g.Expect(got.Assertions.OperatorRestarts).To(Equal(1))
}

// The menu's pod kills target the first member of each StatefulSet the
// resource owns, by the pod-name label; a scenario holding one defines
// that role, and its finding file loads with it.
func TestCampaignKillsFirstMembers(t *testing.T) {
	g := NewWithT(t)
	ref := &compare.State{Children: map[string]map[string]any{
		"StatefulSet/db-followers": {}, "Service/db": {}, "StatefulSet/db-leaders": {}, "Deployment/db-proxy": {}}}
	var names []string
	roles := map[string]scenario.Role{}
	for name, role := range firstMembers(ref) {
		names, roles[name] = append(names, name), role
	}
	g.Expect(names).To(Equal([]string{"db-followers-0", "db-leaders-0"}))
	g.Expect(roles["db-leaders-0"]).To(Equal(scenario.Role{Pods: map[string]string{"statefulset.kubernetes.io/pod-name": "db-leaders-0"}}))

	c, e := exploreCampaign(t)
	base := c.base
	c = &campaign{e: e, base: base, roles: roles}
	fault := &scenario.Fault{Action: scenario.ActionPodKill, Target: "db-leaders-0", Hold: metav1.Duration{Duration: 15 * time.Second}}
	s := c.scenario("explore-6", []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(5)}}, fault)
	g.Expect(s.Spec.Roles).To(HaveKeyWithValue("db-leaders-0", roles["db-leaders-0"]))
	g.Expect(s.Spec.Roles).NotTo(HaveKey("db-followers-0"), "only the role its fault targets")
	file, err := c.writeFinding(t.TempDir(), s, "operator: operator restarts", "1")
	g.Expect(err).NotTo(HaveOccurred())
	set, err := scenario.LoadPaths(e.Set().OperatorFile, file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Scenarios[0].Spec.Roles).To(HaveKey("db-leaders-0"))
	g.Expect(set.Scenarios[0].Spec.Fault.Target).To(Equal("db-leaders-0"))
}

// A campaign's runs wait ten times its slowest convergence (and
// deletion), at least 30 seconds and at most the base's bound, which a
// finding's file keeps.
func TestCampaignPatience(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	base := c.base
	base.Spec.Resource.ConvergeWithin = metav1.Duration{Duration: 2 * time.Minute}
	c = &campaign{e: e, o: Options{Artifacts: t.TempDir()}, base: base}
	seq := []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(5)}}
	for slowest, want := range map[time.Duration]struct{ converge, delete time.Duration }{
		0:                      {30 * time.Second, 30 * time.Second},
		500 * time.Millisecond: {30 * time.Second, 30 * time.Second},
		5 * time.Second:        {50 * time.Second, 50 * time.Second},
		15 * time.Second:       {2 * time.Minute, 150 * time.Second},
		time.Minute:            {2 * time.Minute, 3 * time.Minute},
	} {
		e.converge, e.deletion = slowest, slowest
		r := c.scenario("explore-1", seq, nil).Spec.Resource
		g.Expect(r.ConvergeWithin.Duration).To(Equal(want.converge), "slowest %s", slowest)
		g.Expect(r.DeleteWithin.Duration).To(Equal(want.delete), "slowest %s: the default bound of 3m", slowest)
	}
	g.Expect(base.Spec.Resource.ConvergeWithin.Duration).To(Equal(2*time.Minute), "the base is left as it was")
	g.Expect(base.Spec.Resource.DeleteWithin.Duration).To(BeZero())

	f := c.finding(t.Context(), "explore-1", seq, nil, "settles", "not converged: gave up after 30s")
	set, err := scenario.LoadPaths(e.Set().OperatorFile, f.File)
	g.Expect(err).NotTo(HaveOccurred())
	r := set.Scenarios[0].Spec.Resource
	g.Expect(r.ConvergeWithin.Duration).To(Equal(2*time.Minute), "its replays wait as the base says")
	g.Expect(r.DeleteWithin.Duration).To(BeZero(), "the default, as the base")
}

// A condition that names a sibling the step built with its field's new
// parent is the operator refusing what the step set.
func TestSetBy(t *testing.T) {
	g := NewWithT(t)
	seq := []space.Step{{Path: []string{"spec", "backup"}, Leaf: []string{"spec", "backup", "s3", "prefix"}}, {Path: []string{"spec", "replicas"}}}
	g.Expect(space.SetBy(seq)).To(Equal([]string{"spec.backup.s3.prefix", "spec.replicas", "spec.backup"}))
	conds := []report.Condition{{Type: "Progressing", Status: "False", Message: `spec.backup.s3.credentialsSecret: Secret "explore" does not exist`}}
	g.Expect(report.NamedInCondition(conds, space.SetBy(seq))).NotTo(BeEmpty())
	g.Expect(report.NamedInCondition(conds, space.FieldsOf(seq))).To(BeEmpty())
}

// A starting resource the operator cannot settle is the campaign's one
// finding: a scenario file with no step, which replays as it loads.
func TestUnsettledReference(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	base := c.base
	e.envtest = true
	dir := t.TempDir()
	c = &campaign{e: e, o: Options{Artifacts: dir}, base: base}
	ref := &report.Result{Run: &report.Run{Scenario: "base-reference", Errors: []string{"not converged after the heal: gave up"}}}
	rep, x, err := c.unsettled(t.Context(), ref, &report.Campaign{}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Campaign).To(Equal(x))
	g.Expect(x.Findings).To(HaveLen(1))
	g.Expect(x.Findings[0].Oracle).To(Equal("settles"))
	set, err := scenario.LoadPaths(e.Set().OperatorFile, x.Findings[0].File)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Scenarios[0].Spec.During).To(BeEmpty())
	g.Expect(set.Scenarios[0].Metadata.Description).To(ContainSubstring("as it is, with no step"))

	refused := &report.Result{Run: &report.Run{Errors: []string{"the API server refused the resource: invalid"}}}
	_, _, err = c.unsettled(t.Context(), refused, &report.Campaign{}, time.Now())
	g.Expect(err).To(MatchError(ContainSubstring("the starting resource, created as it is: refused by the API server")))
}

// A value its rules keep from changing is set in the resource as it is
// created: a manifest of the run's own, no patch; the finding carries
// that manifest.
func TestCampaignAtCreation(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	base := c.base
	dir := t.TempDir()
	c = &campaign{e: e, o: Options{Artifacts: dir}, base: base}
	seq := []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(5)},
		{Path: []string{"spec", "storage"}, Value: map[string]any{"size": "3Gi"}, Leaf: []string{"spec", "storage", "size"}, LeafValue: "3Gi", AtCreation: true}}
	s := c.scenario("explore-5", seq, nil)
	g.Expect(s.Spec.During).To(Equal([]scenario.Action{{Patch: map[string]any{"spec": map[string]any{"replicas": int64(5)}}}}), "only the change is a patch")
	g.Expect(s.Metadata.Description).To(Equal("explore: spec.storage.size=3Gi (in a new spec.storage) at creation, then spec.replicas=5"))
	obj, err := e.Object(s)
	g.Expect(err).NotTo(HaveOccurred())
	size, _, _ := unstructured.NestedString(obj.Object, "spec", "storage", "size")
	g.Expect(size).To(Equal("3Gi"))
	b, _ := os.ReadFile(e.Set().Files[base.Metadata.Name])
	g.Expect(string(b)).NotTo(ContainSubstring("3Gi"), "the base is left as it was")

	file, err := c.writeFinding(dir, s, "settles", "stuck")
	g.Expect(err).NotTo(HaveOccurred())
	set, err := scenario.LoadPaths(e.Set().OperatorFile, file)
	g.Expect(err).NotTo(HaveOccurred())
	replay, err := (&fakeEngine{set: set}).Object(set.Scenarios[0])
	g.Expect(err).NotTo(HaveOccurred())
	size, _, _ = unstructured.NestedString(replay.Object, "spec", "storage", "size")
	g.Expect(size).To(Equal("3Gi"), "the finding's resource is the one the run created")
}

// A spec whose schema has no structure gives explore nothing to set,
// and it says why before the campaign starts.
func TestGenerateNeedsStructure(t *testing.T) {
	g := NewWithT(t)
	free := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	_, err := generate(&report.Campaign{}, free, &unstructured.Unstructured{Object: map[string]any{}}, nil)
	g.Expect(err).To(MatchError(ContainSubstring("no field to set (spec (an object whose keys have no schema))")))
}

// TestShardsSplitThePlan: n shards run every sequence of the plan once.
func TestShardsSplitThePlan(t *testing.T) {
	ran := map[int]int{}
	for k := range 3 {
		for i := range 10 {
			if (Options{Shard: k, Shards: 3}).mine(i) {
				ran[i]++
			}
		}
	}
	for i := range 10 {
		if ran[i] != 1 {
			t.Errorf("sequence %d ran in %d shards, want 1", i, ran[i])
		}
	}
	for _, o := range []Options{{}, {Shards: 1}} {
		if !o.mine(7) {
			t.Errorf("%+v leaves sequence 7 out; an unsharded campaign runs them all", o)
		}
	}
}

// An undo that removes a parent replays: its null survives the file.
func TestWriteFindingWithAnUndoLoads(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	dir := t.TempDir()
	set := space.Step{Path: []string{"spec", "backup"}, Value: map[string]any{"schedule": "@daily"}}
	undo, _ := space.UndoOf(set, map[string]any{"spec": map[string]any{}})
	s := c.campaignScenario("explore-9", []space.Step{set, undo})
	file, err := c.writeFinding(dir, s, "differential", "differs")
	g.Expect(err).NotTo(HaveOccurred())
	loaded, err := scenario.LoadPaths(e.Set().OperatorFile, file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded.Scenarios[0].Spec.During).To(Equal([]scenario.Action{
		{Patch: map[string]any{"spec": map[string]any{"backup": map[string]any{"schedule": "@daily"}}}}, {Converge: true},
		{Patch: map[string]any{"spec": map[string]any{"backup": nil}}}}))
	g.Expect(s.Metadata.Description).To(Equal("explore: spec.backup={\"schedule\":\"@daily\"}, then spec.backup back as it was"))
}

// A cluster campaign's finding keeps the ledger it ran with, so that its
// replay judges the writes too.
func TestWriteFindingKeepsTheLedger(t *testing.T) {
	g := NewWithT(t)
	c, e := exploreCampaign(t)
	base := c.base
	b := *base
	b.Spec.Workload = &scenario.Workload{Kind: scenario.WorkloadEtcdKV, Endpoints: &scenario.Endpoints{Role: "members", Port: 2379}}
	s := (&campaign{e: e, base: &b}).campaignScenario("explore-7", []space.Step{{Path: []string{"spec", "replicas"}, Value: int64(2)}})
	file, err := c.writeFinding(t.TempDir(), s, "runs", "reading back")
	g.Expect(err).NotTo(HaveOccurred())
	loaded, err := scenario.LoadPaths(e.Set().OperatorFile, file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded.Scenarios[0].Spec.Workload).To(Equal(b.Spec.Workload))
}

// A finding's file says how to replay it where its campaign ran.
func TestFindingReplaysWhereTheCampaignRan(t *testing.T) {
	c, e := exploreCampaign(t)
	got := c.replayCommand("f.yaml")
	if strings.Contains(got, "--envtest") {
		t.Errorf("a cluster campaign's finding replays with %q", got)
	}
	if !strings.HasSuffix(got, " --set A=1 --set B=2") {
		t.Errorf("a finding replays with %q; want the campaign's --set variables, by name", got)
	}
	e.envtest = true
	if got := c.replayCommand("f.yaml"); !strings.Contains(got, "gauntlet run --envtest -f ") {
		t.Errorf("an envtest campaign's finding replays with %q", got)
	}
}

// Once the starting resource broke an oracle (set aside as explore-0), a
// run that breaks only it is that finding again; what else a run broke
// is judged as before, in order.
func TestWithoutAside(t *testing.T) {
	c := &campaign{aside: map[string]bool{"operator: work begun for the deletion finished before the resource went": true}}
	deletion := report.Broken{Oracle: "operator: work begun for the deletion finished before the resource went", Where: "spec.backup"}
	twin := report.Broken{Oracle: "twin: end state", Where: "spec.replicas"}
	if got, aside := c.withoutAside([]report.Broken{deletion}); len(got) != 0 || !aside {
		t.Errorf("only the set-aside oracle: got %v, aside %v; want none, true", got, aside)
	}
	if got, aside := c.withoutAside([]report.Broken{deletion, twin}); !slices.Equal(got, []report.Broken{twin}) || !aside {
		t.Errorf("with another: got %v, aside %v; want the twin's alone, true", got, aside)
	}
	if got, aside := (&campaign{}).withoutAside([]report.Broken{deletion}); len(got) != 1 || aside {
		t.Errorf("nothing set aside: got %v, aside %v", got, aside)
	}
}
