package chaos

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestExperimentsPassChaosMeshValidation(t *testing.T) {
	db := Pods{Namespace: "db", Names: []string{"db-0"}}
	rest := Pods{Namespace: "db", Names: []string{"db-1", "db-2"}}
	cases := []struct {
		exp      *Experiment
		kind     string
		needs    []Feature
		targets  int
		netRules bool
	}{
		{PodKill("a", db), "PodChaos/pod-kill", nil, 1, false},
		{ContainerKill("a", db, "etcd"), "PodChaos/container-kill", nil, 1, false},
		{PodFailure("a", db, time.Minute), "PodChaos/pod-failure", nil, 1, false},
		{Partition("a", db, rest), "NetworkChaos/partition", []Feature{IPSet}, 2, true},
		{PartitionFrom("a", db, "10.96.0.1", "172.18.0.2"), "NetworkChaos/partition", []Feature{IPSet}, 1, true},
		{Bandwidth("a", db, "1mbps"), "NetworkChaos/bandwidth", []Feature{TBF}, 1, false},
		{Delay("a", db, 100*time.Millisecond), "NetworkChaos/delay", []Feature{Netem}, 1, false},
		{Loss("a", db, 30), "NetworkChaos/loss", []Feature{Netem}, 1, false},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(c.exp.Kind()).To(Equal(c.kind))
			g.Expect(c.exp.Needs).To(Equal(c.needs))
			g.Expect(c.exp.Targets).To(HaveLen(c.targets))
			g.Expect(c.exp.NetworkRules).To(Equal(c.netRules))
			g.Expect(c.exp.Object.GetNamespace()).To(Equal("db"))
			// Chaos Mesh's own defaulting and validation, as its webhook
			// runs them on create.
			var err error
			switch o := c.exp.Object.(type) {
			case *chaosv1alpha1.PodChaos:
				g.Expect(o.Default(t.Context(), o)).To(Succeed())
				_, err = o.ValidateCreate(t.Context(), o)
				g.Expect(o.Spec.Selector.Pods).To(HaveKeyWithValue("db", []string{"db-0"}))
			case *chaosv1alpha1.NetworkChaos:
				g.Expect(o.Default(t.Context(), o)).To(Succeed())
				_, err = o.ValidateCreate(t.Context(), o)
				g.Expect(o.Spec.Selector.Pods).To(HaveKeyWithValue("db", []string{"db-0"}))
			}
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestChaosMeshRejectsWhatItShould(t *testing.T) {
	// The validation above can fail: a bandwidth without a rate is refused.
	g := NewWithT(t)
	e := Bandwidth("a", Pods{Namespace: "db", Names: []string{"db-0"}}, "")
	o := e.Object.(*chaosv1alpha1.NetworkChaos)
	_, err := o.ValidateCreate(t.Context(), o)
	g.Expect(err).To(HaveOccurred())
}

func TestChecks(t *testing.T) {
	ok := Figures{TimeToDegraded: 2 * time.Second, TimeToAvailable: 5 * time.Second, WritesResumeAfter: 3 * time.Second,
		Operations: 500, Linearizable: "Ok"}
	b := Budget{DegradedWithin: metav1.Duration{Duration: 30 * time.Second}, AvailableWithin: metav1.Duration{Duration: time.Minute},
		WritesResumeWithin: metav1.Duration{Duration: 10 * time.Second}, AvailableNeverFalse: true, ReconcileErrors: 2, MinOperations: 100}
	cases := []struct {
		name   string
		mutate func(*Figures)
		want   string
	}{
		{"within budget", func(*Figures) {}, ""},
		{"never degraded", func(f *Figures) { f.TimeToDegraded = -1 }, "never happened"},
		{"slow to available", func(f *Figures) { f.TimeToAvailable = 2 * time.Minute }, "over the budget of 1m0s"},
		{"writes stalled", func(f *Figures) { f.WritesResumeAfter = 11 * time.Second }, "writes resumed"},
		{"lost quorum", func(f *Figures) { f.AvailableFalse = true }, "Available turned False"},
		{"lost writes", func(f *Figures) { f.WritesLost = 3 }, "3 acknowledged writes lost"},
		{"not linearizable", func(f *Figures) { f.Linearizable = "Illegal" }, "not proven linearizable: Illegal"},
		{"check timed out", func(f *Figures) { f.Linearizable = "Unknown" }, "not proven linearizable: Unknown"},
		{"too few operations", func(f *Figures) { f.Operations = 10 }, "only 10 operations"},
		{"panic", func(f *Figures) { f.PanicsDelta = 1 }, "panics_total rose by 1"},
		{"errors", func(f *Figures) { f.ErrorsDelta = 3 }, "reconcile errors rose by 3 (budget 2)"},
		{"queue", func(f *Figures) { f.WorkqueueDepth = 1 }, "workqueue depth 1"},
		{"restart", func(f *Figures) { f.OperatorRestarts = 1 }, "operator restarted 1 times (budget 0)"},
		{"unstable", func(f *Figures) { f.UnstableObjects = []string{"StatefulSet/db"} }, "still changing after convergence: StatefulSet/db"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := ok
			c.mutate(&f)
			v := Violations(Checks(f, b))
			if c.want == "" {
				NewWithT(t).Expect(v).To(BeEmpty())
				return
			}
			NewWithT(t).Expect(v).To(ConsistOf(ContainSubstring(c.want)))
		})
	}
}

func sample(tl *Timeline, at time.Time, conds map[string]string) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	var list []any
	for t, s := range conds {
		list = append(list, map[string]any{"type": t, "status": s, "reason": "R"})
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
	tl.add(at, u)
}

func TestTimeline(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tl := &Timeline{}
	sample(tl, at(0), map[string]string{"Available": "True", "Degraded": "False"})
	sample(tl, at(1), map[string]string{"Available": "True", "Degraded": "False"}) // no change: not recorded
	sample(tl, at(3), map[string]string{"Available": "True", "Degraded": "True"})
	sample(tl, at(8), map[string]string{"Available": "False", "Degraded": "True"})
	sample(tl, at(12), map[string]string{"Available": "True", "Degraded": "False"})
	g.Expect(tl.Samples()).To(HaveLen(4))

	d, ok := tl.First("Degraded", "True", at(2))
	g.Expect(ok).To(BeTrue())
	g.Expect(d).To(Equal(at(3)))
	d, ok = tl.First("Degraded", "True", at(5)) // already True at 5
	g.Expect(ok).To(BeTrue())
	g.Expect(d).To(Equal(at(5)))
	_, ok = tl.First("Degraded", "True", at(13))
	g.Expect(ok).To(BeFalse())
	g.Expect(tl.Ever("Available", "False", at(2), at(7))).To(BeFalse())
	g.Expect(tl.Ever("Available", "False", at(2), at(8))).To(BeTrue())
	g.Expect(tl.Ever("Available", "False", at(9), at(10))).To(BeTrue(), "in force since 8")
	g.Expect(tl.String(t0)).To(ContainSubstring("+8.0s"))
}

func TestReport(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	rep := &Report{Seed: 42, Started: time.Now(), Results: []*Result{
		{Run: &Run{Scenario: "ok", Seed: 1, Experiment: "PodChaos/pod-kill"}, Figures: Figures{Operations: 900, Linearizable: "Ok", TimeToDegraded: time.Second, DegradedClears: 2500 * time.Millisecond, TimeToAvailable: -1,
			OpsDuringFault: 1450, FaultFreeOps: 1600}},
		{Run: &Run{Scenario: "bad", Seed: 2}, Violations: []string{"3 acknowledged writes lost"}, Artifacts: "x/bad"},
		{Run: &Run{Scenario: "netem", Skipped: "the node kernel lacks netem"}},
		{Run: &Run{Scenario: "no-ledger", Seed: 3, Experiment: "PodChaos/pod-kill"}, Figures: Figures{TimeToDegraded: -1, DegradedClears: -1, TimeToAvailable: 0}},
	}}
	g.Expect(rep.Failed()).To(BeTrue())
	g.Expect(rep.Write(dir)).To(Succeed())
	sum, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(sum)).To(And(ContainSubstring("| ok | passed | PodChaos/pod-kill | 1s | 2.5s | never | 0s | 0s | 1450 / 1600 (91%) | 900 | 0 | Ok |"),
		ContainSubstring("| no-ledger | passed | PodChaos/pod-kill | never | never | 0s | — | — | — | — | — | — |"),
		ContainSubstring("**bad failed** (replay with seed 2"), ContainSubstring("**netem skipped:** the node kernel lacks netem")))
	raw, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	g.Expect(err).NotTo(HaveOccurred())
	var suite junitSuite
	g.Expect(xml.Unmarshal(raw, &suite)).To(Succeed())
	g.Expect(suite.Tests).To(Equal(4))
	g.Expect(suite.Failures).To(Equal(1))
	g.Expect(suite.Skipped).To(Equal(1))
	g.Expect(suite.Cases[1].Failure.Message).To(Equal("3 acknowledged writes lost"))
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(string(js), `"scenario"`)).To(Equal(4))
}

func TestFaultShare(t *testing.T) {
	g := NewWithT(t)
	g.Expect((&Figures{OpsDuringFault: 1450, FaultFreeOps: 1600}).FaultShare()).To(Equal("1450 / 1600 (91%)"))
	g.Expect((&Figures{OpsDuringFault: 1450}).FaultShare()).To(Equal("1450"), "no baseline")
	g.Expect((&Figures{}).FaultShare()).To(Equal("—"), "not measured, not zero operations")
}
