package explore

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// Engine is what a campaign needs of the engine (*engine.Engine, set up
// with the Operator file and the base scenario): runs, judged; the
// cluster's CRDs and a scratch resource for dry runs; what the runs so far
// taught it (the slowest waits, the operator's requests through the API
// proxy).
type Engine interface {
	// Name names where the campaign runs, for its report.
	Name() string
	Logf(format string, args ...any)
	// Set holds the Operator file and the scenarios; a campaign's own
	// scenarios are added to its Files.
	Set() *scenario.Set
	Overrides() map[string]string
	OnEnvtest() bool
	Object(s *scenario.Scenario) (*unstructured.Unstructured, error)
	ServedVersions(ctx context.Context, obj *unstructured.Unstructured) ([]engine.ServedVersion, error)
	Scratch(ctx context.Context, s *scenario.Scenario) (*engine.Scratch, error)

	Run(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) *report.Result
	RunDifferential(ctx context.Context, s *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State)
	ReferenceRun(ctx context.Context, base *scenario.Scenario, seed uint64, artifacts string) (*report.Result, *compare.State, error)
	ExpectRefusal(name string, fields []string)
	EndHoldsWhenStill(d time.Duration)
	Slowest() (converge, deletion time.Duration)
	Requests() ([]apiproxy.Request, bool)
}

var _ Engine = (*engine.Engine)(nil)
