package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// readRun reads a run's report.json (DIR or the file), checked against the
// report schema.
func readRun(path string) (*report.Report, string, error) {
	dir := path
	if fi, err := os.Stat(path); err != nil {
		return nil, "", usagef("%w", err)
	} else if !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	file := filepath.Join(dir, "report.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, "", usagef("%s is not a chaos run's folder: %w", path, err)
	}
	if err := report.Validate(b); err != nil {
		return nil, "", fmt.Errorf("%s: %w", file, err)
	}
	rep, err := report.ReadReport(file)
	if err != nil {
		return nil, "", err
	}
	return rep, dir, nil
}

func newReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Re-render a run's report.html, summary.md and junit.xml from its report.json",
		Args:  exactArgs("DIR"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, dir, err := readRun(args[0])
			if err != nil {
				return err
			}
			if err := rep.Write(dir); err != nil {
				return err
			}
			p, err := htmlreport.Write(rep, dir)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintln(cmd.OutOrStdout(), rep.Summary())
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", p)
			return nil
		},
	}
}
