package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	suite "github.com/gauntlet-dev/gauntlet/suites/chaos"
)

func newListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scenarios and what each checks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, s := range suite.Scenarios {
				_, _ = fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Describe)
			}
			return tw.Flush()
		},
	}
}
