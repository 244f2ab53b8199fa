package report

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/invopop/jsonschema"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "rewrite report.schema.json from the Go types")

// generate reflects Report into a strict schema: every field without
// omitempty is required, no other property is allowed, and descriptions
// come from the Go doc comments.
func generate(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{
		Mapper: func(ty reflect.Type) *jsonschema.Schema {
			switch ty {
			case reflect.TypeFor[time.Duration]():
				return &jsonschema.Schema{Type: "integer", Description: "a duration in nanoseconds (negative: it never happened)"}
			case reflect.TypeFor[metav1.Duration]():
				return &jsonschema.Schema{Type: "string", Pattern: `^(-?([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+|0)$`, Description: "a Go duration such as 30s or 1m30s"}
			}
			return nil
		},
	}
	if err := r.AddGoComments("github.com/gauntlet-dev/gauntlet/chaos/report", "."); err != nil {
		t.Fatalf("reading the doc comments: %v", err)
	}
	s := r.Reflect(&Report{})
	s.ID = SchemaID
	s.Title = "Gauntlet chaos report (" + ReportAPIVersion + " " + ReportKind + ")"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestSchemaMatchesTheGoTypes(t *testing.T) {
	want := generate(t)
	if *update {
		if err := os.WriteFile("report.schema.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	NewWithT(t).Expect(string(Schema)).To(Equal(string(want)),
		"report.schema.json is stale: run go test ./chaos/report -update and commit it")
}

func TestRecordedRunsValidate(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(files).NotTo(BeEmpty(), "the recorded runs in testdata")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			b, err := os.ReadFile(f)
			g.Expect(err).NotTo(HaveOccurred())
			if err := Validate(b); err != nil {
				t.Fatal(err)
			}
			rep, err := ReadReport(f)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rep.Results).NotTo(BeEmpty())
		})
	}
}

func TestAWrittenReportValidates(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	now := time.Now()
	rep := NewReport(7, "kind-test")
	s := &Series{}
	s.Operator = []OperatorSample{{At: now, Up: true, Reconciles: 3}}
	s.Pods = []PodEvent{{At: now, Pod: "ns/db-0", Event: PodRestarted}}
	rep.Results = []*Result{
		{Run: &Run{Scenario: "a", Seed: 1, Experiment: "PodChaos/pod-kill", Targets: []string{"ns/db-0"}}, Series: s,
			Figures: Figures{TimeToDegraded: -1, Linearizable: "Ok"}, Violations: []string{"x"},
			Timeline: []Sample{{At: now, Conditions: map[string]string{"Available": "True/Quorum"}}}},
		{Run: &Run{Scenario: "b", Skipped: "no netem"}},
	}
	g.Expect(rep.Write(dir)).To(Succeed())
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	g.Expect(err).NotTo(HaveOccurred())
	if err := Validate(b); err != nil {
		t.Fatal(err)
	}
}

// A campaign that ended at its starting resource changed no field, and
// that finding (explore-0) has no step: the lists are empty, not null.
func TestACampaignEndedAtItsStartValidates(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	rep := NewReport(1, "kind-test")
	rep.Results = []*Result{{Run: &Run{Scenario: "base-reference", Seed: 1}, Violations: []string{"x"}}}
	rep.Campaign = &Campaign{Base: "base", Seed: 1, Runs: 1,
		Findings: []Finding{{Scenario: "explore-0", Oracle: "operator: x", What: "x", File: "findings/explore-0.yaml"}}}
	g.Expect(rep.Write(dir)).To(Succeed())
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	g.Expect(err).NotTo(HaveOccurred())
	if err := Validate(b); err != nil {
		t.Fatal(err)
	}
}

func TestBadReportsAreRefused(t *testing.T) {
	cases := map[string]string{
		"not JSON":          `{`,
		"missing results":   `{"apiVersion":"gauntlet.dev/v1alpha1","kind":"ChaosReport","seed":1,"started":"2026-11-24T00:00:00Z"}`,
		"seed as a string":  `{"apiVersion":"gauntlet.dev/v1alpha1","kind":"ChaosReport","seed":"1","started":"2026-11-24T00:00:00Z","results":[]}`,
		"unknown property":  `{"apiVersion":"gauntlet.dev/v1alpha1","kind":"ChaosReport","seed":1,"started":"2026-11-24T00:00:00Z","results":[],"extra":1}`,
		"a result's figure": `{"apiVersion":"gauntlet.dev/v1alpha1","kind":"ChaosReport","seed":1,"started":"2026-11-24T00:00:00Z","results":[{"scenario":"a","seed":1,"phases":{},"injectTook":0,"healTook":0,"figures":{"writesLost":"none"},"budget":{},"took":0}]}`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Validate([]byte(doc))).NotTo(Succeed())
		})
	}
}
