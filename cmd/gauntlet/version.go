package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// version is set at release time (-ldflags -X main.version=v0.1.0);
// otherwise the module's version from the build info (go install
// ...@v0.1.0), else "devel".
var version = ""

// commit is set by the build (make gauntlet) where the build info has
// none: Go records no VCS facts for a build in a workspace.
var commit = ""

// buildFacts are what a binary knows of how it was built.
type buildFacts struct {
	Version, Commit, Go, Kind, ChaosMeshAPI string
	Modified                                bool
}

// readBuildFacts reads the version, the commit and the versions of kind
// and Chaos Mesh's API the binary was built with.
func readBuildFacts() buildFacts {
	f := buildFacts{Version: version, Commit: "unknown", Kind: "unknown", ChaosMeshAPI: "unknown"}
	if commit != "" {
		f.Commit = commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if f.Version == "" {
			f.Version = "devel"
		}
		return f
	}
	f.Go = bi.GoVersion
	if f.Version == "" {
		f.Version = bi.Main.Version
		if f.Version == "" || f.Version == "(devel)" {
			f.Version = "devel"
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			f.Commit = s.Value
		case "vcs.modified":
			f.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
		}
		switch d.Path {
		case "sigs.k8s.io/kind":
			f.Kind = v
		case "github.com/chaos-mesh/chaos-mesh/api":
			f.ChaosMeshAPI = v
		}
	}
	return f
}

// writeVersion prints the facts a bug report needs.
func writeVersion(w io.Writer, f buildFacts) error {
	commit := f.Commit
	if f.Modified {
		commit += " (modified)"
	}
	minors := make([]string, len(cluster.NodeImages))
	for i, n := range cluster.NodeImages {
		minors[i] = fmt.Sprintf("%s (%s, or %s built offline)", n.Minor, n.Upstream, n.Offline)
	}
	_, err := fmt.Fprintf(w, "gauntlet %s\ncommit: %s\ngo: %s\nkind: %s\nChaos Mesh: %s release images (API %s)\nKubernetes: %s\n",
		f.Version, commit, f.Go, f.Kind, install.ReleaseTag, f.ChaosMeshAPI, strings.Join(minors, ", "))
	return err
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit, and the kind, Chaos Mesh and Kubernetes versions it runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeVersion(cmd.OutOrStdout(), readBuildFacts())
		},
	}
}
