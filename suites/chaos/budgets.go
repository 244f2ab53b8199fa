package chaos

import (
	_ "embed"

	"github.com/gauntlet-dev/gauntlet/chaos"
)

// DefaultBudgets is budgets.yaml as built in.
//
//go:embed budgets.yaml
var DefaultBudgets []byte

// LoadBudgets reads a budget file, or the built-in budgets.yaml when path
// is empty.
func LoadBudgets(path string) (*chaos.Budgets, error) {
	if path == "" {
		return chaos.ParseBudgets(DefaultBudgets, "budgets.yaml (built in)", Names())
	}
	return chaos.LoadBudgets(path, Names())
}
