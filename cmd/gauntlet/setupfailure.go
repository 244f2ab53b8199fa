package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// setupFailed writes the report of a run whose setup failed (the step,
// the error, the evidence of pods that would not start, where the bundle
// is) and says where it is; the error is returned as it was.
func setupFailed(err error, ro engine.RunOptions, stdout io.Writer) error {
	failure := report.SetupFailure{Step: "setup", Error: err.Error()}
	if se := (*engine.SetupError)(nil); errors.As(err, &se) {
		failure = se.SetupFailure
	}
	rep := report.NewReport(ro.Seed, "")
	rep.Setup = &failure
	if werr := rep.Write(ro.Artifacts); werr != nil {
		return errors.Join(err, werr)
	}
	if _, werr := htmlreport.Write(rep, ro.Artifacts); werr != nil {
		return errors.Join(err, werr)
	}
	_, _ = fmt.Fprintf(stdout, "setup failed at %s; report: %s\n", failure.Step, filepath.Join(ro.Artifacts, htmlreport.FileName))
	if failure.Evidence != "" {
		_, _ = fmt.Fprint(stdout, failure.Evidence)
	}
	return err
}
