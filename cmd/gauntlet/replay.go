package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newReplayCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "replay DIR SCENARIO",
		Short: "Re-run one scenario of a recorded run with the seed it ran with",
		Long: `replay reads DIR/report.json, finds SCENARIO and runs it again, from the
scenario files (-f; the reference operator's by default in a Gauntlet
checkout), with the seed recorded for it, so every choice of target and
timing is the same. The new run's report goes to its own folder (--report).`,
		Example: "  gauntlet replay artifacts/chaos-20261124-170000 leader-partition",
		Args:    exactArgs("DIR", "SCENARIO"),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 {
				if rep, _, err := readRun(args[0]); err == nil {
					var names []string
					for _, r := range rep.Results {
						names = append(names, r.Scenario)
					}
					return names, cobra.ShellCompDirectiveNoFileComp
				}
			}
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, _, err := readRun(args[0])
			if err != nil {
				return err
			}
			res := rep.Result(args[1])
			if res == nil {
				var names []string
				for _, r := range rep.Results {
					names = append(names, r.Scenario)
				}
				return usagef("%s has no scenario %q; it ran:\n  %s", args[0], args[1], strings.Join(names, "\n  "))
			}
			f.scenarios, f.seed = []string{res.Scenario}, int64(rep.Seed)
			if err := f.validate(); err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "replaying %s with seed %d (run seed %d)\n", res.Scenario, res.Seed, rep.Seed)
			return runChaos(cmd.Context(), f, map[string]uint64{res.Scenario: res.Seed}, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, false)
	return cmd
}
