package chaos

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
)

// Environment variables read by OptionsFromEnv (make test-chaos sets the
// image names from bin/images.env and bin/chaos-mesh/images.env).
const (
	EnvSeed      = "GAUNTLET_CHAOS_SEED"      // replay a run
	EnvScenarios = "GAUNTLET_CHAOS_SCENARIOS" // a regexp over scenario names
	EnvBudgets   = "GAUNTLET_CHAOS_BUDGETS"   // a budget file instead of the built-in one
)

// OptionsFromEnv builds the environment and run options from the
// environment, as the e2e tier does, with defaults for this repository.
// A malformed value is an error that names the variable.
func OptionsFromEnv(artifacts string) (Options, RunOptions, error) {
	o := Options{
		E2E: e2e.OptionsFromEnv(),
		Chaos: install.Options{
			ControllerImage: e2e.Getenv("CHAOS_CONTROLLER_IMAGE", install.DefaultControllerImage),
			DaemonImage:     e2e.Getenv("CHAOS_DAEMON_IMAGE", install.DefaultDaemonImage),
		},
	}
	if o.E2E.OperatorImage == "" {
		return o, RunOptions{}, fmt.Errorf("OPERATOR_IMAGE is not set (make test-chaos sets it from bin/images.env)")
	}
	r := RunOptions{Artifacts: artifacts, Seed: uint64(time.Now().UnixNano() % 1_000_000)}
	if s := os.Getenv(EnvSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return o, r, fmt.Errorf("%s=%q: want a non-negative integer", EnvSeed, s)
		}
		r.Seed = seed
	}
	if s := os.Getenv(EnvScenarios); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			return o, r, fmt.Errorf("%s=%q: %w", EnvScenarios, s, err)
		}
		r.Match = re
	}
	var err error
	if r.Budgets, err = LoadBudgets(os.Getenv(EnvBudgets)); err != nil {
		return o, r, err
	}
	return o, r, nil
}
