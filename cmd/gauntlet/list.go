package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newListCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the scenarios of the files and what each does",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.load(); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, s := range f.loaded.Scenarios {
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Metadata.Name, s.Spec.Fault.Describe(), s.Metadata.Description)
			}
			return tw.Flush()
		},
	}
	f.registerFiles(cmd)
	return cmd
}
