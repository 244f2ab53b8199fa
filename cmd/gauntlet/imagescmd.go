package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newImagesCmd settles the images a kind run would use, as run does, and
// prints them as KEY=VALUE lines: for scripts that make their own kind
// cluster (ci/tier.sh), so that the choice lives in one place.
func newImagesCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Settle the node and Chaos Mesh images a kind run would use and print them as KEY=VALUE",
		Long: `Settles the kind node image and config and Chaos Mesh's images as gauntlet run does:
the upstream images when the Docker engine has them or pulls them, else (at once with
--offline) the ones a Gauntlet checkout builds, saying which on stderr and why. Prints
NODE_IMAGE, KIND_CONFIG, CHAOS_CONTROLLER_IMAGE and CHAOS_DAEMON_IMAGE on stdout. It builds
nothing: an image named gauntlet.dev/* may still need its make target.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validateImages(); err != nil {
				return err
			}
			prog := newProgress(cmd.ErrOrStderr())
			err := f.resolveNodeImage(cmd.Context(), prog)
			f.resolveChaosImages(cmd.Context(), prog)
			prog.Close()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "NODE_IMAGE=%s\nKIND_CONFIG=%s\nCHAOS_CONTROLLER_IMAGE=%s\nCHAOS_DAEMON_IMAGE=%s\n",
				f.nodeImage, f.kindConfig, f.chaosController, f.chaosDaemon)
			return err
		},
	}
	f.registerImages(cmd)
	return cmd
}
