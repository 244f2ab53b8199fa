package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/cluster/podstate"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// bundleTimeout bounds collecting a setup failure's evidence: every
// object, event and log of two namespaces and kind's node logs.
const bundleTimeout = 2 * time.Minute

// SetupError is a failed Setup: the step it failed at, why, and where its
// evidence went.
type SetupError struct {
	report.SetupFailure
	Err error
}

func (e *SetupError) Error() string { return fmt.Sprintf("setting up the %s: %v", e.Step, e.Err) }

func (e *SetupError) Unwrap() error { return e.Err }

// setupFailed turns err, met at step, into a SetupError. With
// Options.Artifacts set it first writes what shows the cause under
// <Artifacts>/setup: error.txt (the error and, for pods that would not
// start, their state, log tail and events) and a bundle of the
// operator's and Chaos Mesh's namespaces with kind's logs.
func (e *Engine) setupFailed(ctx context.Context, step string, err error) *SetupError {
	se := &SetupError{SetupFailure: report.SetupFailure{Step: step, Error: err.Error()}, Err: err}
	if stuck := (*podstate.StuckError)(nil); errors.As(err, &stuck) {
		se.Evidence = stuck.Evidence
	}
	if e.o.Artifacts == "" || e.Config == nil {
		return se
	}
	dir := filepath.Join(e.o.Artifacts, "setup")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bundleTimeout)
	defer cancel()
	if werr := os.MkdirAll(dir, 0o755); werr == nil {
		_ = os.WriteFile(filepath.Join(dir, "error.txt"), []byte(se.Error()+"\n\n"+se.Evidence), 0o644)
	}
	chaosNS := e.o.Chaos.Namespace
	if chaosNS == "" {
		chaosNS = install.DefaultNamespace
	}
	o := framework.BundleOptions{Config: e.Config, Namespaces: []string{e.operator.Namespace, chaosNS}}
	if e.Cluster != nil {
		o.Logs = e.Cluster.BundleLogs()
	}
	if berr := framework.CollectBundle(ctx, dir, o); berr != nil {
		e.logf("setup failed at %s; collecting its evidence: %v", step, berr)
		return se
	}
	se.Bundle = dir
	e.logf("setup failed at %s; evidence in %s", step, dir)
	return se
}

// operatorReadyWithin bounds the wait for the operator's pods: image
// pulls on a cold node and a manager's leader election fit in it, and a
// pod that will not start ends the wait sooner (podstate.Guard).
const operatorReadyWithin = 3 * time.Minute

// podGuard watches pods of a namespace while a wait runs (podstate.Guard).
func (e *Engine) podGuard(namespace string, selector map[string]string, what string) (*podstate.Guard, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	return &podstate.Guard{Client: cs, Namespace: namespace, Selector: selector, What: what}, nil
}
