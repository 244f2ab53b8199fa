package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/preflight"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// errInvalidFiles is a validate that found mistakes (printed already).
var errInvalidFiles = errors.New("invalid scenario files")

func newValidateCmd() *cobra.Command {
	var files []string
	var overrides map[string]string
	cmd := &cobra.Command{
		Use:   "validate -f PATH...",
		Short: "Check scenario files without a cluster: every mistake with its file, line and field",
		Long: `validate reads scenario files (kind Scenario) and the Operator file beside
them, from the files and directories given with -f, and checks each field's
name, type and value: roles that exist, a fault the engine supports with the
parameters its action needs, CEL that compiles, manifests that exist,
variables that are defined. Then it renders the operator's manifests and
checks the files against them: each image's replaces runs in a container,
the namespace and selector select the operator's pod template, and the
resource's manifest and every CEL expression name only fields of the CRD's
schema (self.spec.sizee is refused). It touches no cluster. Exit status 0 when every
file is valid, 1 otherwise (each mistake on its own line). gauntlet run -f
runs the same files on a cluster.`,
		Example: "  gauntlet validate -f suites/chaos/scenarios\n  gauntlet validate -f suites/examples/memcached/scenarios",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usagef("-f is required: scenario files or directories")
			}
			set, err := scenario.LoadPaths(files...)
			var unserved []preflight.Unserved
			if err == nil {
				// What only the rendered manifests and the CRD can tell.
				unserved, err = preflight.Check(set, overrides)
			}
			var es scenario.Errors
			switch {
			case errors.As(err, &es):
				for _, e := range es {
					_, _ = fmt.Fprintln(cmd.ErrOrStderr(), e.Error())
				}
				noun := "mistakes"
				if len(es) == 1 {
					noun = "mistake"
				}
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "%d %s\n", len(es), noun)
				return errInvalidFiles
			case err != nil:
				return usagef("%w", err)
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "valid: operator %s (%s), %d scenarios:\n", set.Operator.Metadata.Name, set.OperatorFile, len(set.Scenarios))
			for _, s := range set.Scenarios {
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "  %s (%s): %s\n", s.Metadata.Name, set.Files[s.Metadata.Name], s.Spec.Fault.Describe())
			}
			if len(unserved) > 0 {
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "note: the manifests hold kinds that Kubernetes does not serve and no CRD among them defines, so they run only on a cluster that serves them (gauntlet run --kubeconfig), not on one made here: %s\n",
					joinUnserved(unserved))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "file", "f", nil, "scenario files or directories (repeat or comma-separate)")
	cmd.Flags().StringToStringVar(&overrides, "set", nil, "a variable of the files, NAME=VALUE, as gauntlet run --set gives it (repeat)")
	return cmd
}

// joinUnserved is the unserved kinds on one line.
func joinUnserved(unserved []preflight.Unserved) string {
	lines := make([]string, len(unserved))
	for i, u := range unserved {
		lines[i] = u.String()
	}
	return strings.Join(lines, "; ")
}
