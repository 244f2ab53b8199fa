package engine

import (
	"context"
	"fmt"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/viewfault"
)

// viewExperiment makes a view fault (viewfault.Experiment) on the API
// proxy in front of the operator.
func (r *run) viewExperiment(ctx context.Context, f scenario.Fault) (*chaosmesh.Experiment, error) {
	if r.e.view == nil {
		// Setup starts the proxy for every set with a view fault, and an
		// explore campaign asks for it: no file can get here.
		return nil, fmt.Errorf("internal error: a view fault (%s) without the API proxy in front of the operator", f.Action)
	}
	return viewfault.Experiment(ctx, r.e.view, f, viewfault.Run{Name: r.s.Metadata.Name, Namespace: r.ns,
		CreatedRV: r.createdRV, DeletedRV: r.deletedRV, Twin: r.twin, Logf: r.e.logf})
}
