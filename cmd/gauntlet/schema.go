package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// schemas are the JSON Schemas gauntlet schema prints, by name.
var schemas = map[string][]byte{
	"scenario": scenario.ScenarioSchema,
	"operator": scenario.OperatorSchema,
	"report":   report.Schema,
}

func newSchemaCmd() *cobra.Command {
	names := slices.Sorted(maps.Keys(schemas))
	return &cobra.Command{
		Use:   "schema {" + strings.Join(names, "|") + "}",
		Short: "Print the JSON Schema of Scenario or Operator files, or of report.json",
		Long: `Prints a JSON Schema built into this binary, for an editor or another tool:
the Scenario and Operator files' (gauntlet validate checks more than a schema can
say: roles, CEL, the operator's manifests and CRD) or report.json's.

  gauntlet schema scenario > .gauntlet/scenario.schema.json
  # then, first line of a scenario file:
  # yaml-language-server: $schema=.gauntlet/scenario.schema.json`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, ok := schemas[args[0]]
			if !ok {
				return usagef("no schema %q: give one of %s", args[0], strings.Join(names, ", "))
			}
			_, err := cmd.OutOrStdout().Write(b)
			return err
		},
	}
}
