package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/install"
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
"info ") exit 0 ;;
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

// resolveWith runs resolve against a docker that has the images in have
// and pulls those in pullable, and returns what it printed.
func resolveWith(t *testing.T, have, pullable []string, resolve func(context.Context, *progress) error) string {
	t.Helper()
	fakeDocker(t, have, pullable)
	var out bytes.Buffer
	prog := newProgress(&out)
	if err := resolve(t.Context(), prog); err != nil {
		t.Fatal(err)
	}
	prog.Close()
	return out.String()
}

// expectSaid checks that out says said, or, with said empty, nothing
// under what.
func expectSaid(g Gomega, out, what, said string) {
	if said == "" {
		g.Expect(out).NotTo(ContainSubstring(what))
	} else {
		g.Expect(out).To(ContainSubstring(said))
	}
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
			f := tc.flags
			out := resolveWith(t, tc.have, tc.pullable, f.resolveNodeImage)
			g.Expect(f.nodeImage).To(Equal(tc.wantImage))
			g.Expect(filepath.Base(f.kindConfig)).To(Equal(tc.config))
			g.Expect(f.kindConfig).To(BeAnExistingFile())
			expectSaid(g, out, "node image", tc.said)
		})
	}
}

// Chaos Mesh's images are the release's in --chaos-mesh-registry when
// the engine has them or pulls them both, else the ones built here, and
// images given are kept; each choice is said with its reason.
func TestResolveChaosImages(t *testing.T) {
	const (
		ctrl       = "ghcr.io/chaos-mesh/chaos-mesh:" + install.ReleaseTag
		daemon     = "ghcr.io/chaos-mesh/chaos-daemon:" + install.ReleaseTag
		mirrorCtrl = "registry.example.com/ghcr/chaos-mesh/chaos-mesh:" + install.ReleaseTag
		mirrorDmn  = "registry.example.com/ghcr/chaos-mesh/chaos-daemon:" + install.ReleaseTag
	)
	for _, tc := range []struct {
		name                 string
		flags                runFlags
		have, pullable       []string
		wantCtrl, wantDaemon string
		said                 string
	}{
		{name: "pulled", flags: runFlags{chaosRegistry: "ghcr.io"}, pullable: []string{ctrl, daemon},
			wantCtrl: ctrl, wantDaemon: daemon, said: "Chaos Mesh images: pulled " + ctrl + " and " + daemon + " in"},
		{name: "from a mirror", flags: runFlags{chaosRegistry: "registry.example.com/ghcr/"}, have: []string{mirrorCtrl}, pullable: []string{mirrorDmn},
			wantCtrl: mirrorCtrl, wantDaemon: mirrorDmn, said: "Chaos Mesh images: pulled " + mirrorDmn + " in"},
		{name: "already here", flags: runFlags{chaosRegistry: "ghcr.io"}, have: []string{ctrl, daemon},
			wantCtrl: ctrl, wantDaemon: daemon, said: "Chaos Mesh images: " + ctrl + " and " + daemon + ", already in the Docker engine"},
		{name: "one pull fails", flags: runFlags{chaosRegistry: "ghcr.io"}, pullable: []string{ctrl},
			wantCtrl: install.DefaultControllerImage, wantDaemon: install.DefaultDaemonImage,
			said: "Chaos Mesh images: pulling " + daemon + " failed (Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host); " +
				install.DefaultControllerImage + " and " + install.DefaultDaemonImage + " instead, built here when missing"},
		{name: "offline", flags: runFlags{chaosRegistry: "ghcr.io", offline: true}, pullable: []string{ctrl, daemon},
			wantCtrl: install.DefaultControllerImage, wantDaemon: install.DefaultDaemonImage, said: "(--offline: nothing is pulled; built here when missing)"},
		{name: "given", flags: runFlags{chaosController: "example.com/cm:1", chaosDaemon: "example.com/cd:1"}, pullable: []string{ctrl, daemon},
			wantCtrl: "example.com/cm:1", wantDaemon: "example.com/cd:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := tc.flags
			out := resolveWith(t, tc.have, tc.pullable, func(ctx context.Context, prog *progress) error {
				f.resolveChaosImages(ctx, prog)
				return nil
			})
			g.Expect(f.chaosController).To(Equal(tc.wantCtrl))
			g.Expect(f.chaosDaemon).To(Equal(tc.wantDaemon))
			expectSaid(g, out, "Chaos Mesh images", tc.said)
		})
	}
}

// gauntlet images prints what run would take, for scripts that make their
// own kind cluster, and says on stderr why.
func TestImagesCommand(t *testing.T) {
	g := NewWithT(t)
	ctrl, daemon := install.ReleaseImages("127.0.0.1:5002")
	fakeDocker(t, nil, []string{"kindest/node:v1.36.1", ctrl, daemon})

	code, stdout, stderr := gauntlet("images", "--kubernetes-version", "v1.36.3", "--chaos-mesh-registry", "127.0.0.1:5002")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(Equal("NODE_IMAGE=kindest/node:v1.36.1\n" +
		"KIND_CONFIG=" + kindConfigFile(t, "single-node-upstream") + "\n" +
		"CHAOS_CONTROLLER_IMAGE=" + ctrl + "\nCHAOS_DAEMON_IMAGE=" + daemon + "\n"))
	g.Expect(stderr).To(ContainSubstring("node image: pulled kindest/node:v1.36.1"))
	g.Expect(stderr).To(ContainSubstring("Chaos Mesh images: pulled " + ctrl + " and " + daemon))

	code, stdout, stderr = gauntlet("images", "--offline", "--kubernetes-version", "1.37")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(ContainSubstring("NODE_IMAGE=gauntlet.dev/kind-node:v1.37.2\n"))
	g.Expect(stdout).To(ContainSubstring("CHAOS_CONTROLLER_IMAGE=" + install.DefaultControllerImage + "\n"))
}

// The images kind needs to start (the node image's, Chaos Mesh's) are made
// first; the operator's, etcd's and the relay's while kind makes the
// cluster.
func TestSplitLater(t *testing.T) {
	g := NewWithT(t)
	now, later := splitLater([]string{"operator-image", "etcd-images", "chaos-images", "relay-image", "node-image", "KIND_NODE_VERSION=v1.35.4"})
	g.Expect(now).To(Equal([]string{"chaos-images", "node-image", "KIND_NODE_VERSION=v1.35.4"}))
	g.Expect(later).To(Equal([]string{"operator-image", "etcd-images", "relay-image"}))
}

// kindConfigFile is where the built-in kind config of that name is
// written, checked to hold it.
func kindConfigFile(t *testing.T, name string) string {
	t.Helper()
	path, err := cluster.KindConfigFile(name)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cluster.KindConfig(name)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s does not hold the built-in config %s (%v)", path, name, err)
	}
	return path
}
