package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

func TestReport(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	conditions := []Sample{{Conditions: map[string]string{"Available": "True/Ready", "Degraded": "False/Healthy"}}}
	rep := &Report{Seed: 42, Started: time.Now(), Results: []*Result{
		{Run: &Run{Scenario: "ok", Seed: 1, Experiment: "PodChaos/pod-kill"}, Figures: Figures{Operations: 900, Linearizable: "Ok", TimeToDegraded: time.Second, DegradedClears: 2500 * time.Millisecond, TimeToAvailable: -1,
			OpsDuringFault: 1450, FaultFreeOps: 1600}, Timeline: conditions},
		{Run: &Run{Scenario: "bad", Seed: 2}, Violations: []string{"3 acknowledged writes lost"}, Artifacts: "x/bad"},
		{Run: &Run{Scenario: "netem", Skipped: "the node kernel lacks netem"}},
		{Run: &Run{Scenario: "no-ledger", Seed: 3, Experiment: "PodChaos/pod-kill"}, Figures: Figures{TimeToDegraded: -1, DegradedClears: -1, TimeToAvailable: 0}, Timeline: conditions},
		{Run: &Run{Scenario: "explore-9", Seed: 4, Errors: []string{"the kill never happened"}}, Unjudged: "the fault never fired"},
	}}
	g.Expect(rep.Failed()).To(BeTrue())
	g.Expect(rep.Write(dir)).To(Succeed())
	sum, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(sum)).To(And(ContainSubstring("| ok | passed | PodChaos/pod-kill | 1s | 2.5s | never | 0s | 0s | 1450 / 1600 (91%) | 900 | 0 | Ok |"),
		ContainSubstring("| no-ledger | passed | PodChaos/pod-kill | never | never | 0s | — | — | — | — | — | — |"),
		ContainSubstring("| bad | failed |  | — | — | — | — |"), // ended before its timeline was read
		ContainSubstring("**bad failed** (replay with seed 2"), ContainSubstring("**netem skipped:** the node kernel lacks netem"),
		ContainSubstring("| explore-9 | unjudged |"), ContainSubstring("**explore-9 not judged:** the fault never fired")))
	raw, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	g.Expect(err).NotTo(HaveOccurred())
	var suite junitSuite
	g.Expect(xml.Unmarshal(raw, &suite)).To(Succeed())
	g.Expect(suite.Tests).To(Equal(5))
	g.Expect(suite.Failures).To(Equal(1), "a run not judged is no failure")
	g.Expect(suite.Skipped).To(Equal(2))
	g.Expect(suite.Cases[1].Failure.Message).To(Equal("3 acknowledged writes lost"))
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(string(js), `"scenario"`)).To(Equal(5))
}

// A run whose resources report neither Degraded nor Available (an
// operator with other conditions, or none) has no columns for them.
func TestSummaryWithoutConventionalConditions(t *testing.T) {
	g := NewWithT(t)
	rep := &Report{Seed: 1, Started: time.Now(), Results: []*Result{
		{Run: &Run{Scenario: "master-pod-kill", Seed: 1, Experiment: "PodChaos/pod-kill"}, Figures: Figures{TimeToDegraded: -1, DegradedClears: -1, TimeToAvailable: -1},
			Timeline: []Sample{{Conditions: map[string]string{}}}},
		{Run: &Run{Scenario: "netem", Skipped: "the node kernel lacks netem"}},
	}}
	sum := rep.Summary()
	g.Expect(sum).NotTo(ContainSubstring("Degraded"))
	g.Expect(sum).To(ContainSubstring("| scenario | verdict | fault | writes resume |"))
	g.Expect(sum).To(ContainSubstring("| master-pod-kill | passed | PodChaos/pod-kill | — | — | — | — | — | — |\n"))
	g.Expect(sum).To(ContainSubstring("| netem | skipped |  |  |  |  |  |  |  |\n"), "a skipped row has as many cells as the header")
}

func TestFaultShare(t *testing.T) {
	g := NewWithT(t)
	g.Expect((&Figures{OpsDuringFault: 1450, FaultFreeOps: 1600}).FaultShare()).To(Equal("1450 / 1600 (91%)"))
	g.Expect((&Figures{OpsDuringFault: 1450}).FaultShare()).To(Equal("1450"), "no baseline")
	g.Expect((&Figures{}).FaultShare()).To(Equal("—"), "not measured, not zero operations")
}

// A setup failure fails the report; its summary and JUnit say where and
// why, with the evidence.
func TestSetupFailure(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	rep := NewReport(3, "")
	rep.Setup = &SetupFailure{Step: "Chaos Mesh", Error: "Chaos Mesh's chaos-daemon pods will not become ready by waiting", Evidence: "events of Pod d-1:\n  none\n", Bundle: dir + "/setup"}
	g.Expect(rep.Failed()).To(BeTrue())
	g.Expect(rep.Write(dir)).To(Succeed())
	summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(summary)).To(ContainSubstring("**Setup failed** at Chaos Mesh; no scenario ran (evidence in " + dir + "/setup)"))
	g.Expect(string(summary)).To(ContainSubstring("events of Pod d-1:"))
	junit, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(junit)).To(ContainSubstring(`tests="1" failures="1"`))
	g.Expect(string(junit)).To(ContainSubstring(`<testcase name="setup" classname="chaos" time="0">`))
	g.Expect(string(junit)).To(ContainSubstring(`message="setup failed at Chaos Mesh"`))
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Validate(b)).To(Succeed())
}
