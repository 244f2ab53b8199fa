package explore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/chaos/faultplan"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// A finding under a stale view as of a deletion is written with the
// recreate it needs, and reads back as a valid scenario that holds it.
func TestFindingKeepsTheRecreate(t *testing.T) {
	g := NewWithT(t)
	s := &scenario.Scenario{APIVersion: scenario.APIVersion, Kind: scenario.KindScenario, Metadata: scenario.Metadata{Name: "explore-9"}}
	s.Spec.Resource = scenario.Resource{Manifest: "explore-9-resource.yaml", Converged: []string{"has(self.status)"}}
	s.Spec.Roles = map[string]scenario.Role{faultplan.Operator: {Operator: true}}
	s.Spec.Before = []scenario.Action{{Recreate: true}}
	s.Spec.Fault = scenario.Fault{Action: scenario.ActionStaleView, Target: faultplan.Operator, StaleFrom: scenario.StaleFromDeleted, Restart: true,
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

// A run that breaks a known cause first and a new one after it is a
// finding for the new one: an oracle every run breaks (a write after the
// resource is released, on an operator that always makes it) hides no
// other.
func TestFirstNewCause(t *testing.T) {
	g := NewWithT(t)
	released := report.Broken{Oracle: "operator: no write once the resource is released", Where: "configmaps/zk"}
	state := report.Broken{Oracle: "twin: end state equals the fault-free twin's", Where: "PersistentVolumeClaim/data-zk-0.deleting"}
	known := []report.Finding{{Scenario: "explore-1", Oracle: released.Oracle, Where: released.Where}}
	b, again := firstNewCause(known, []report.Broken{released, state}, []string{"spec.replicas=3"}, nil)
	g.Expect(b).To(HaveValue(Equal(state)))
	g.Expect(again).To(Equal(0))
	b, again = firstNewCause(known, []report.Broken{released}, nil, nil)
	g.Expect(b).To(BeNil())
	g.Expect(again).To(Equal(0), "counted under explore-1")
	b, again = firstNewCause(nil, nil, nil, nil)
	g.Expect(b).To(BeNil())
	g.Expect(again).To(Equal(-1))
}
