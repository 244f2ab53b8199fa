package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/preflight"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/starter"
)

// defaultInitDir is where gauntlet init writes, in the project.
const defaultInitDir = "gauntlet"

func newInitCmd() *cobra.Command {
	var p starter.Project
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write an Operator file and starter scenarios from your operator project",
		Long: `init reads your operator project (a kubebuilder or operator-sdk layout: config/default,
config/samples, PROJECT; or --kustomize and --sample), renders its manifests, and writes
into ` + defaultInitDir + `/ an Operator file (namespace, selector, image, metrics from the manager's
Deployment) and starter scenarios: a pod kill of one of the resource's pods, a partition of one
from the rest, the operator killed during a change, conflicts on its status writes (a view
fault), and a base for gauntlet explore. The files are checked against your manifests before
init returns. What it had to guess, it says.`,
		Example: `  gauntlet init && gauntlet run -f gauntlet --set MYOP_IMAGE=example.com/myop:dev
  gauntlet init --kustomize deploy/overlays/test --sample examples/cluster.yaml --out test/gauntlet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			found, err := starter.Inspect(p)
			if err != nil {
				return usagef("%w", err)
			}
			files, err := starter.Render(found, out)
			if err != nil {
				return err
			}
			if err := files.Write(out, force); err != nil {
				return usagef("%w", err)
			}
			set, err := scenario.LoadPaths(out)
			if err == nil {
				_, err = preflight.Check(set, nil)
			}
			if err != nil {
				return fmt.Errorf("the files written to %s do not validate (a bug of init: please report it with your manifests):\n%w", out, err)
			}
			w := cmd.OutOrStdout()
			for _, f := range files {
				_, _ = fmt.Fprintf(w, "wrote %s\n", filepath.Join(out, f.Name))
			}
			_, _ = fmt.Fprintf(w, "\nfrom %s: operator %s in %s, image %s (variable %s), resource %s %s\n",
				found.Kustomize, found.Name, found.Namespace, found.Image, found.ImageVariable, found.Kind, found.Sample)
			for _, n := range found.Notes {
				_, _ = fmt.Fprintf(w, "note: %s\n", n)
			}
			_, _ = fmt.Fprintf(w, "\nnext: build your image, then\n  gauntlet run -f %s --set %s=<your image>\n", out, found.ImageVariable)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&p.Dir, "project", ".", "the operator project's root")
	fs.StringVar(&p.Kustomize, "kustomize", "", "the kustomization folder that deploys the operator (default <project>/config/default)")
	fs.StringVar(&p.Sample, "sample", "", "the starting custom resource (default: the first of <project>/config/samples of a kind the manifests serve)")
	fs.StringVar(&out, "out", defaultInitDir, "the folder to write")
	fs.BoolVar(&force, "force", false, "overwrite files init wrote before")
	_ = cmd.MarkFlagDirname("project")
	_ = cmd.MarkFlagDirname("kustomize")
	_ = cmd.MarkFlagFilename("sample", "yaml", "yml")
	return cmd
}
