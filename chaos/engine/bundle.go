package engine

import (
	"context"
	"os"
	"path/filepath"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// bundle keeps a failed run's evidence, once: the objects, events and
// logs of its namespace, the operator's and Chaos Mesh's, and the
// operator's log.
func (r *run) bundle(ctx context.Context) {
	if r.res.Verdict() == report.Failed && r.ns != "" {
		r.e.bundle(ctx, r.res.Artifacts, r.ns, r.e.Runner.ChaosNamespace)
	}
}

// bundle writes a failure bundle into dir (framework.CollectBundle) for
// the namespaces and the operator's, unless dir holds one already: a run
// that failed before its deletion has one, and one that failed in it or
// against its twin after it (whose namespace is gone) gets what is left.
func (e *Engine) bundle(ctx context.Context, dir string, namespaces ...string) {
	if _, err := os.Stat(filepath.Join(dir, e.operator.Namespace)); err == nil {
		return
	}
	var logs func(string) error
	if e.Cluster != nil {
		logs = e.Cluster.BundleLogs()
	} else if e.host != nil {
		logs = e.host.CopyLog
	}
	if err := framework.CollectBundle(ctx, dir, framework.BundleOptions{
		Config: e.Config, Namespaces: append(namespaces, e.operator.Namespace), Logs: logs,
	}); err != nil {
		e.logf("%s: bundle incomplete: %v", filepath.Base(dir), err)
	}
}
