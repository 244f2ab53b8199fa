package htmlreport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// result is a scenario with a minute of workload around a 20 s fault.
func result(name string, t0 time.Time) *report.Result {
	s := &report.Series{Start: t0, BucketMillis: 100}
	for i := range 600 {
		w := 10
		if i >= 200 && i < 230 {
			w = 0 // writes stalled for 3 s
		}
		s.Writes, s.Reads, s.Errors = append(s.Writes, w), append(s.Reads, w/2), append(s.Errors, 0)
		s.LatencyP50Millis, s.LatencyMaxMillis = append(s.LatencyP50Millis, 4), append(s.LatencyMaxMillis, 12)
	}
	for i := range 60 {
		s.Operator = append(s.Operator, report.OperatorSample{At: t0.Add(time.Duration(i) * time.Second), Up: i != 25, Reconciles: float64(3 * i)})
	}
	s.Pods = []report.PodEvent{{At: t0.Add(20 * time.Second), Pod: "ns/db-1", Event: report.PodDeleted}}
	return &report.Result{
		Run: &report.Run{Scenario: name, Seed: 9, Experiment: "PodChaos/pod-kill", Targets: []string{"ns/db-1"},
			Phases: report.Phases{Start: t0.Add(-time.Minute), Requested: t0.Add(20 * time.Second), Injected: t0.Add(21 * time.Second),
				Healed: t0.Add(40 * time.Second), Converged: t0.Add(50 * time.Second)}},
		Series: s, Took: 2 * time.Minute,
		Budget:  report.Budget{WritesResumeWithin: metaDuration(5 * time.Second), MinOperations: 100},
		Figures: report.Figures{TimeToDegraded: 2 * time.Second, TimeToAvailable: time.Second, WritesResumeAfter: 3 * time.Second, Operations: 5000, Linearizable: "Ok"},
		Timeline: []report.Sample{
			{At: t0, Conditions: map[string]string{"Available": "True/Quorum", "Degraded": "False/Healthy"}},
			{At: t0.Add(22 * time.Second), Conditions: map[string]string{"Available": "True/Quorum", "Degraded": "True/MemberDown"}},
		},
	}
}

func TestRender(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	t0 := time.Unix(1_800_000_000, 0)
	ok, slow := result("leader-pod-kill", t0), result("partition", t0)
	slow.Figures.WritesResumeAfter = 9 * time.Second
	slow.Artifacts = filepath.Join(dir, "partition")
	slow.Violations = report.Violations(report.Checks(slow.Figures, slow.Budget))
	// The failed scenario left a bundle and a history; nothing else exists.
	g.Expect(os.MkdirAll(filepath.Join(dir, "partition", "chaos-partition-2"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "partition", "history.json"), []byte("{}"), 0o644)).To(Succeed())
	ok.Sharing = &report.Sharing{Beside: []string{"partition", "netem-delay"}}
	slow.Sharing = &report.Sharing{Alone: "it failed beside others", Beside: []string{"leader-pod-kill"}, FirstAttempt: []string{"writes resumed after 12s"}}
	rep := report.NewReport(42, "kind-gauntlet")
	rep.Results = []*report.Result{ok, slow, {Run: &report.Run{Scenario: "netem-delay", Skipped: "the node kernel lacks netem"}}}
	rep.Took = 3 * time.Minute // two scenarios of 2 minutes each, side by side

	path, err := Write(rep, dir)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	html := string(b)

	g.Expect(strings.Count(html, "<svg")).To(Equal(2), "one timeline per scenario that ran")
	g.Expect(html).To(ContainSubstring("1 passed"))
	g.Expect(html).To(ContainSubstring("1 failed"))
	g.Expect(html).To(ContainSubstring("1 skipped"))
	g.Expect(html).To(ContainSubstring("3 scenarios in 3m0s"), "the run's wall time, not the sum of its scenarios'")
	g.Expect(html).To(ContainSubstring("the node kernel lacks netem"))
	g.Expect(html).To(ContainSubstring("ran beside partition, netem-delay"))
	g.Expect(html).To(ContainSubstring("ran alone: it failed beside others (first beside leader-pod-kill)"))
	g.Expect(html).To(ContainSubstring("<li>writes resumed after 12s</li>"), "the failed first attempt is kept")
	g.Expect(html).To(ContainSubstring(`<td class="num over">9s</td>`), "the figure over its budget stands out in the summary")
	g.Expect(html).To(ContainSubstring("time until writes resumed after the fault: 9s, over the budget of 5s"))
	g.Expect(html).To(ContainSubstring(`<a href="partition/history.json">`))
	g.Expect(html).To(ContainSubstring(`<a href="partition">failure bundle`))
	g.Expect(html).NotTo(ContainSubstring("linearizability.html"), "no link to what the run did not leave")
	for _, external := range []string{"<script", "<link", "@import", "src=\"http"} {
		g.Expect(html).NotTo(ContainSubstring(external), "the page is self-contained")
	}
}

func TestTimelineNeedsASeries(t *testing.T) {
	g := NewWithT(t)
	svg, err := timeline(&report.Result{Run: &report.Run{Scenario: "x"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(svg).To(BeNil(), "a scenario that never ran its workload has no timeline")
}

// A view fault's run has no workload, but its proxy's actions are drawn on
// the timeline with the conditions and the operator's counters.
func TestTimelineOfAViewFault(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	res := &report.Result{
		Run:        &report.Run{Scenario: "x", Phases: report.Phases{Requested: at, Injected: at, Healed: at.Add(15 * time.Second)}},
		Timeline:   []report.Sample{{At: at.Add(-5 * time.Second), Conditions: map[string]string{"Available": "True/Ready"}}},
		Injections: []report.Injection{{At: at.Add(2 * time.Second), What: "409", Request: "patch statefulsets db/db"}, {At: at.Add(time.Second), What: "409"}},
	}
	svg, err := timeline(res)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(svg)).To(ContainSubstring("API proxy: each action of the view fault"))
	t0, xmin, xmax := span(res)
	g.Expect(t0).To(Equal(at))
	g.Expect(xmin).To(Equal(-5.0))
	g.Expect(xmax).To(Equal(16.0))
}

func TestConditionColours(t *testing.T) {
	g := NewWithT(t)
	g.Expect(conditionColor("Available", "True")).To(Equal(colGood))
	g.Expect(conditionColor("Available", "False")).To(Equal(colBad))
	g.Expect(conditionColor("Degraded", "True")).To(Equal(colBad))
	g.Expect(conditionColor("Degraded", "False")).To(Equal(colOff))
	g.Expect(conditionColor("Progressing", "True")).To(Equal(colBusy))
	g.Expect(conditionColor("Ready", "Unknown")).To(Equal(colOff))
	g.Expect(conditionTypes([]report.Sample{{Conditions: map[string]string{"Zeta": "", "Degraded": "", "Available": ""}}})).
		To(Equal([]string{"Available", "Degraded", "Zeta"}))
}

func metaDuration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// An explore campaign's page says so, leads with what the campaign
// covered, learned and found, and shows each run's steps.
func TestRenderCampaign(t *testing.T) {
	g := NewWithT(t)
	rep := report.NewReport(1, "envtest")
	run := &report.Result{Run: &report.Run{Scenario: "explore-3", Seed: 1}, Description: "explore: spec.replicas=2, then spec.image=x"}
	refused := &report.Result{Run: &report.Run{Scenario: "explore-4", Seed: 1, Errors: []string{"not converged"}},
		Refused: "refused by the operator, in its Progressing condition (False): spec.resources.claims: Forbidden"}
	unjudged := &report.Result{Run: &report.Run{Scenario: "explore-6", Seed: 1, Errors: []string{"the kill never happened"}},
		Unjudged: "not judged, the fault never fired: the kill never happened"}
	rep.Results = []*report.Result{run, refused, unjudged}
	rep.Campaign = &report.Campaign{Base: "base", Seed: 1, Runs: 1, Fields: []string{"spec.image", "spec.replicas"}, Covered: []string{"spec.image"},
		Follows: []string{"spec.image → StatefulSet/db spec.template.spec.containers[0].image"},
		Findings: []report.Finding{{Scenario: "explore-3", Oracle: "consistency: x", What: "spec.image=x, but …", Shrunk: []string{"spec.image=x"}, File: "findings/explore-3.yaml",
			Again: []string{"explore-7", "explore-9"}},
			{Scenario: "explore-5", Oracle: "settles", What: "gave up; status " + strings.Repeat("x", 400), Shrunk: []string{"spec.replicas=9"}, File: "findings/explore-5.yaml"},
			{Scenario: "explore-0", Oracle: "operator: work begun for the deletion", What: "Job/x unfinished", File: "findings/explore-0.yaml"}}}
	b, err := Render(rep, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	html := string(b)
	g.Expect(html).To(ContainSubstring("<h1>Gauntlet explore campaign</h1>"))
	g.Expect(html).NotTo(ContainSubstring("Gauntlet chaos run"))
	g.Expect(html).To(ContainSubstring("2 generated for, 1 changed by some run"))
	g.Expect(html).To(ContainSubstring("<code>spec.image → StatefulSet/db spec.template.spec.containers[0].image</code>"))
	g.Expect(html).To(ContainSubstring(`<a href="#explore-3">explore-3</a> broke <b>consistency: x</b>`))
	g.Expect(html).To(ContainSubstring(`<p class="meta">explore: spec.replicas=2, then spec.image=x</p>`), "each run's steps under its heading")
	g.Expect(html).To(ContainSubstring(`its cause again in 2 later runs, not shrunk: <a href="#explore-7">explore-7</a>, <a href="#explore-9">explore-9</a>`),
		"a finding lists the runs that broke its oracle in the same place again")
	g.Expect(html).To(ContainSubstring(`<span class="refused">1 refused by the operator, saying why</span>`))
	g.Expect(html).To(ContainSubstring(`<span class="badge refused">refused</span>`))
	g.Expect(html).To(ContainSubstring(`<span class="unjudged">1 not judged</span>`))
	g.Expect(html).To(ContainSubstring(`<span class="badge unjudged">unjudged</span>`))
	g.Expect(html).To(ContainSubstring(`0 failed`), "neither a refusal the oracle allows nor a run not judged is a failure")
	g.Expect(html).To(ContainSubstring(`<td><span class="meta">none injected</span></td>`), "a run with no fault says so in its fault cell")
	g.Expect(html).To(ContainSubstring("no step: the starting resource as it is · written to <code>findings/explore-0.yaml</code>"), "a finding of the starting resource has no step to show")
	g.Expect(html).To(ContainSubstring("… (whole under the run)"), "a long finding is cut in the summary")
	g.Expect(html).NotTo(ContainSubstring("shards"), "an unsharded campaign says nothing of shards")
	g.Expect(html).NotTo(ContainSubstring("<th>causes</th>"), "findings not grouped yet")

	rep.Campaign.Causes = report.GroupFindings(rep.Campaign.Findings)
	b, err = Render(rep, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("<th>causes</th><td>3 (findings that broke one oracle in one place)"))
	g.Expect(string(b)).To(ContainSubstring(`<b>settles</b> at <code>spec.replicas</code>: <a href="#explore-5">explore-5</a>`))

	rep.Campaign.Shards, rep.Campaign.AllCoveredAfter = 3, 262*time.Second
	b, err = Render(rep, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("run as <b>3 shards</b> of an Indexed Job"))
	g.Expect(string(b)).To(ContainSubstring("(every one after 4m22s)"))
	g.Expect(html).NotTo(ContainSubstring(strings.Repeat("x", 300)))
}

// A run whose setup failed shows where, why and what the pods that would
// not start showed, escaped, with no scenario.
func TestRenderSetupFailure(t *testing.T) {
	g := NewWithT(t)
	rep := report.NewReport(3, "")
	rep.Setup = &report.SetupFailure{Step: "operator", Error: "the operator's pods will not become ready by waiting:\n  op-system/op-1 container manager: CrashLoopBackOff",
		Evidence: "log of the crashed container (last 20 lines):\n  | panic: POD_NAMESPACE must be set <here>\n", Bundle: "/tmp/run/setup"}
	b, err := Render(rep, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	page := string(b)
	g.Expect(page).To(ContainSubstring(`<h2>Setup failed at operator <span class="badge failed">no scenario ran</span></h2>`))
	g.Expect(page).To(ContainSubstring("op-system/op-1 container manager: CrashLoopBackOff"))
	g.Expect(page).To(ContainSubstring("panic: POD_NAMESPACE must be set &lt;here&gt;"))
	g.Expect(page).To(ContainSubstring("<code>/tmp/run/setup</code>"))
	g.Expect(page).NotTo(ContainSubstring(`id="tally"`), "no tally of scenarios when none ran")
}
