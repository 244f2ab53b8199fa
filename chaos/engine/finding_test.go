package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// A finding under a stale view as of a deletion is written with the
// recreate it needs, and reads back as a valid scenario that holds it.
func TestFindingKeepsTheRecreate(t *testing.T) {
	g := NewWithT(t)
	s := &scenario.Scenario{APIVersion: scenario.APIVersion, Kind: scenario.KindScenario, Metadata: scenario.Metadata{Name: "explore-9"}}
	s.Spec.Resource = scenario.Resource{Manifest: "explore-9-resource.yaml", Converged: []string{"has(self.status)"}}
	s.Spec.Roles = map[string]scenario.Role{operatorRole: {Operator: true}}
	s.Spec.Before = []scenario.Action{{Recreate: true}}
	s.Spec.Fault = scenario.Fault{Action: scenario.ActionStaleView, Target: operatorRole, StaleFrom: scenario.StaleFromDeleted, Restart: true,
		Hold: metav1.Duration{Duration: 15 * time.Second}, Requests: &scenario.RequestMatch{Resource: "zookeeperclusters"}}
	s.Spec.During = []scenario.Action{{Patch: map[string]any{"spec": map[string]any{"replicas": 2}}}}
	s.Spec.Assertions = scenario.Assertions{StableFor: &metav1.Duration{Duration: 5 * time.Second}, OperatorRestarts: 1}
	b, err := findingYAML(s, "twin: end state", "differs", "gauntlet run -f op.yaml -f explore-9.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("  before:\n    - recreate: true\n"))
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "explore-9-resource.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "explore-9.yaml"), b, 0o644)).To(Succeed())
	obj, errs := scenario.LoadFile(filepath.Join(dir, "explore-9.yaml"))
	g.Expect(errs).To(BeEmpty(), "%s", strings.TrimSpace(string(b)))
	back, ok := obj.(*scenario.Scenario)
	g.Expect(ok).To(BeTrue())
	g.Expect(back.Spec.Before).To(HaveLen(1))
	g.Expect(back.Spec.Before[0].Recreate).To(BeTrue())
}

// A run is placed where its end state first differed, else where its
// first violated check says it broke: two panics in two functions are
// two causes.
func TestWhereBroken(t *testing.T) {
	g := NewWithT(t)
	crashed := &report.Result{Checks: []report.Check{
		{Name: "operator restarts", Violation: "operator restarted 1 times", Where: "panic in op/k8sutils.getEnvironmentVariables"},
		{Name: "reconcile errors", Violation: "+3"},
	}}
	g.Expect(whereBroken(crashed)).To(Equal("panic in op/k8sutils.getEnvironmentVariables"))
	crashed.Twin = &report.TwinDiff{Differences: []report.Difference{{Path: "Service/db.spec.ports"}}}
	g.Expect(whereBroken(crashed)).To(Equal("Service/db.spec.ports"), "the end state's place first")
	g.Expect(whereBroken(&report.Result{Checks: []report.Check{{Name: "settles", Violation: "gave up"}}})).To(BeEmpty())
}
