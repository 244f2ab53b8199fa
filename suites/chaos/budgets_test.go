package chaos

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestEveryScenarioHasItsOwnBudget(t *testing.T) {
	g := NewWithT(t)
	b, err := LoadBudgets("")
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[string]bool{}
	for _, s := range Scenarios {
		g.Expect(seen[s.Name]).To(BeFalse(), "scenario names are unique: %s", s.Name)
		seen[s.Name] = true
		g.Expect(b.Scenarios).To(HaveKey(s.Name), "budgets.yaml has a budget for %s", s.Name)
		g.Expect(b.For(s.Name).AvailableWithin.Duration).To(BeNumerically(">", 0), "%s: time to Available is judged", s.Name)
		g.Expect(b.For(s.Name).MinOperations).To(BeNumerically(">", 0), "%s: the workload must have run", s.Name)
		g.Expect(s.Fault).NotTo(BeNil(), s.Name)
		g.Expect(s.Describe).NotTo(BeEmpty(), s.Name)
	}
	g.Expect(len(Scenarios)).To(BeNumerically(">=", 12))
}

func TestScenarioSeedsDiffer(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ScenarioSeed(7, 0)).NotTo(Equal(ScenarioSeed(7, 1)))
	g.Expect(ScenarioSeed(7, 0)).NotTo(Equal(ScenarioSeed(8, 0)))
	g.Expect(ScenarioSeed(7, 3)).To(Equal(ScenarioSeed(7, 3)), "replayable")
}
