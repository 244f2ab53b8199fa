package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/cluster"
)

// fakeDocker puts a docker on PATH that has the images in have, pulls
// those in pullable, and refuses every other pull as a machine without a
// registry does.
func fakeDocker(t *testing.T, have, pullable []string) {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
case "$1 $2" in
"image inspect") for i in ` + strings.Join(have, " ") + `; do [ "$i" = "$3" ] && exit 0; done; exit 1 ;;
"pull -q") for i in ` + strings.Join(pullable, " ") + `; do [ "$i" = "$3" ] && { echo "$3"; exit 0; }; done
  echo 'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2; exit 1 ;;
esac
exit 2
`
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// Without --node-image a run takes kind's image for the minor when the
// engine has it or pulls it, else the one built offline, says which and
// why, and takes the kind config that image needs.
func TestResolveNodeImage(t *testing.T) {
	for _, tc := range []struct {
		name              string
		flags             runFlags
		have, pullable    []string
		wantImage, config string
		said              string
	}{
		{name: "pulled", flags: runFlags{kubernetesVersion: "1.36"}, pullable: []string{"kindest/node:v1.36.1"},
			wantImage: "kindest/node:v1.36.1", config: "single-node-upstream.yaml", said: "node image: pulled kindest/node:v1.36.1 in"},
		{name: "already here", flags: runFlags{kubernetesVersion: "v1.35.4", multiNode: true}, have: []string{"kindest/node:v1.35.0"},
			wantImage: "kindest/node:v1.35.0", config: "multi-node-upstream.yaml", said: "node image: kindest/node:v1.35.0, already in the Docker engine"},
		{name: "no registry", flags: runFlags{kubernetesVersion: "1.37"},
			wantImage: "gauntlet.dev/kind-node:v1.37.2", config: "single-node-podnet.yaml",
			said: "node image: pulling kindest/node:v1.37.0 failed (Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host); gauntlet.dev/kind-node:v1.37.2 instead, built here when missing"},
		{name: "offline", flags: runFlags{kubernetesVersion: "1.35", offline: true, multiNode: true}, pullable: []string{"kindest/node:v1.35.0"},
			wantImage: cluster.DefaultNodeImage, config: "multi-node.yaml", said: "node image: gauntlet.dev/kind-node:v1.35.4 (--offline: nothing is pulled"},
		{name: "given", flags: runFlags{nodeImage: "registry.example/node:v1.36.1", kubernetesVersion: "1.35"},
			wantImage: "registry.example/node:v1.36.1", config: "single-node.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fakeDocker(t, tc.have, tc.pullable)
			var out bytes.Buffer
			prog := newProgress(&out)
			defer prog.Close()
			f := tc.flags
			f.resolveNodeImage(t.Context(), prog)
			g.Expect(f.nodeImage).To(Equal(tc.wantImage))
			g.Expect(filepath.Base(f.kindConfig)).To(Equal(tc.config))
			g.Expect(f.kindConfig).To(BeAnExistingFile())
			if tc.said == "" {
				g.Expect(out.String()).NotTo(ContainSubstring("node image"))
			} else {
				g.Expect(out.String()).To(ContainSubstring(tc.said))
			}
		})
	}
}
