// Command gauntlet runs Gauntlet's chaos tier outside `go test` and reads
// what it leaves behind.
//
//	gauntlet run                   every scenario, from a bare machine to a report
//	gauntlet list                  the scenarios and what each checks
//	gauntlet report DIR            re-render a run's report.html (and summary, JUnit)
//	gauntlet replay DIR SCENARIO   re-run one scenario of a run with its recorded seed
//	gauntlet compare A B           two runs' figures side by side
//	gauntlet validate -f PATH      check scenario files without a cluster
//	gauntlet completion SHELL      shell completion (bash, zsh, fish, powershell)
//
// Exit status: 0 when every scenario passed or was skipped for a stated
// reason, 1 when one failed or the run could not be made, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is bad input: reported with a hint, exit status 2.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// failedRun is a run that completed with a failed scenario: its summary was
// printed, exit status 1.
var errFailedRun = errors.New("a scenario failed")

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(context.Background())
	name := "gauntlet " + cmd.Name()
	if cmd == root {
		name = "gauntlet"
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errFailedRun), errors.Is(err, errInvalidFiles), errors.Is(err, errRegressed):
		return 1
	case errors.As(err, &ue) || isFlagError(err) || strings.HasPrefix(err.Error(), "unknown command") ||
		// cobra's flag groups (MarkFlagsMutuallyExclusive) return an untyped error.
		strings.HasPrefix(err.Error(), "if any flags in the group"):
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", name, err)
		_, _ = fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return 2
	default:
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
}

// flagError marks errors cobra returns for bad flags and arguments.
type flagError struct{ error }

func isFlagError(err error) bool {
	var fe flagError
	return errors.As(err, &fe)
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gauntlet",
		Short: "Chaos runs for Kubernetes operators, and the reports they leave",
		Long: `gauntlet puts an operator under Chaos Mesh on a kind cluster (or any cluster by
kubeconfig) while a workload runs against what it manages, and judges each
scenario on the resource's conditions, the operator's metrics and the data.
A run leaves report.html (open it in a browser), report.json, summary.md and
junit.xml in its folder.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })
	root.AddCommand(newRunCmd(), newListCmd(), newReportCmd(), newReplayCmd(), newCompareCmd(), newValidateCmd(), newExploreCmd(), newBenchCmd(), newImagesCmd(), newVersionCmd(), newInitCmd(), newSchemaCmd())
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })
	}
	return root
}

// exactArgs is cobra.ExactArgs with a message that names the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return flagError{fmt.Errorf("want %d arguments (%v), got %d: %q", len(names), names, len(args), args)}
		}
		return nil
	}
}
