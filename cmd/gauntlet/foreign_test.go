package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/chaos/preflight"
	"github.com/gauntlet-dev/gauntlet/chaos/relay"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// A user's operator run from a Gauntlet checkout whose reference images
// are built gets nothing of the reference operator: not its image for a
// variable that happens to share its name (OPERATOR_IMAGE), not a build of
// it, not its manifests. This is the image stage of gauntlet run (choice,
// builds, the check of what is loaded) on a copy of the Memcached
// example whose variable was renamed the way a user named it.
func TestAnotherOperatorGetsNothingOfOurs(t *testing.T) {
	g := NewWithT(t)
	const (
		ours   = "gauntlet.dev/operator:dev-0123456789ab"
		theirs = "example.com/memcached-operator:dev"
	)
	root := fakeCheckout(t, ours)
	user := filepath.Join(root, "user")
	copyTree(t, "../../suites/examples/memcached/config", filepath.Join(user, "config"))
	copyTree(t, "../../suites/examples/memcached/scenarios", filepath.Join(user, "scenarios"))
	renameVariable(t, filepath.Join(user, "scenarios"), "MEMCACHED_OPERATOR_IMAGE", "OPERATOR_IMAGE")
	t.Chdir(root)
	t.Setenv("OPERATOR_IMAGE", "")

	node, _ := cluster.NodeImageFor("1.35")
	fakeDocker(t, []string{node.Offline, install.DefaultControllerImage, install.DefaultDaemonImage,
		ours, "gauntlet.dev/operator:dev", theirs, "example.com/memcached:bookworm"}, nil)

	f := &runFlags{files: []string{filepath.Join(user, "scenarios")}, kubernetesVersion: "1.35", offline: true,
		buildImages: true, seed: -1, timeout: time.Minute, chaosRegistry: install.ReleaseRegistry, relayImage: relay.Image, overrides: map[string]string{}}
	g.Expect(f.validate()).To(Succeed())
	var out bytes.Buffer
	prog := newProgress(&out)
	g.Expect(prepareImages(t.Context(), f, prog)).To(Succeed(), out.String())
	if f.imagesReady != nil {
		g.Expect(f.imagesReady(t.Context())).To(Succeed(), out.String())
	}
	prog.Close()
	_, err := preflight.Check(f.loaded, f.overrides)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(f.overrides).To(BeEmpty(), "no variable of ours is set for their files")
	g.Expect(f.imagesToLoad()).To(ContainElement(theirs))
	for _, img := range f.imagesToLoad() {
		g.Expect(img).NotTo(HavePrefix("gauntlet.dev/operator"), "loaded into kind: %v", f.imagesToLoad())
	}
	made, err := os.ReadFile(filepath.Join(root, "made.txt"))
	g.Expect(err).NotTo(HaveOccurred(), "the checkout's make was run for Chaos Mesh's and the node image: %s", out.String())
	g.Expect(strings.Fields(string(made))).To(ConsistOf("chaos-images", "node-image"),
		"only the harness's own images are built, none of the reference operator's")
}

// fakeCheckout makes a Gauntlet checkout whose images are built: its
// bin/images.env names the reference operator's image, and its Makefile
// records the targets it is asked for in made.txt.
func fakeCheckout(t *testing.T, operatorImage string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                    "module github.com/gauntlet-dev/gauntlet\n\ngo 1.26\n",
		"tools/images/build.sh":     "#!/bin/sh\n",
		"bin/images.env":            "OPERATOR_IMAGE=" + operatorImage + "\n",
		"bin/chaos-mesh/images.env": "CHAOS_CONTROLLER_IMAGE=" + install.DefaultControllerImage + "\nCHAOS_DAEMON_IMAGE=" + install.DefaultDaemonImage + "\n",
		"Makefile":                  "Makefile: ;\n%:\n\t@echo $@ >> made.txt\n",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// copyTree copies a folder.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-R", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -R %s %s: %v: %s", from, to, err, out)
	}
}

// renameVariable renames a variable in every file of dir.
func renameVariable(t *testing.T, dir, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), from, to)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A run whose setup failed leaves a report that says where and why, with
// the evidence, and prints where it is.
func TestSetupFailedWritesAReport(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	err := &engine.SetupError{SetupFailure: report.SetupFailure{Step: "operator", Error: "the operator's pods will not become ready by waiting",
		Evidence: "log of the crashed container (last 20 lines):\n  | POD_NAMESPACE must be set\n", Bundle: filepath.Join(dir, "setup")}, Err: errors.New("stuck")}
	var out bytes.Buffer
	g.Expect(setupFailed(err, engine.RunOptions{Seed: 4, Artifacts: dir}, &out)).To(MatchError(err))
	g.Expect(out.String()).To(HavePrefix("setup failed at operator; report: " + filepath.Join(dir, "report.html") + "\n"))
	g.Expect(out.String()).To(ContainSubstring("POD_NAMESPACE must be set"))
	rep, rerr := report.ReadReport(dir)
	g.Expect(rerr).NotTo(HaveOccurred())
	g.Expect(rep.Failed()).To(BeTrue())
	g.Expect(rep.Setup.Step).To(Equal("operator"))
	g.Expect(filepath.Join(dir, "report.html")).To(BeAnExistingFile())
	g.Expect(filepath.Join(dir, "junit.xml")).To(BeAnExistingFile())
}

// gauntlet version says what a bug report needs: the version, the
// commit, and what it runs.
func TestVersion(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	g.Expect(writeVersion(&out, buildFacts{Version: "v0.1.0", Commit: "0123abc", Modified: true, Go: "go1.26.8", Kind: "v0.33.0", ChaosMeshAPI: "v0.0.0-x"})).To(Succeed())
	g.Expect(out.String()).To(Equal("gauntlet v0.1.0\ncommit: 0123abc (modified)\ngo: go1.26.8\nkind: v0.33.0\n" +
		"Chaos Mesh: " + install.ReleaseTag + " release images (API v0.0.0-x)\n" +
		"Kubernetes: 1.35 (kindest/node:v1.35.0, or gauntlet.dev/kind-node:v1.35.4 built offline), " +
		"1.36 (kindest/node:v1.36.1, or gauntlet.dev/kind-node:v1.36.3 built offline), " +
		"1.37 (kindest/node:v1.37.0, or gauntlet.dev/kind-node:v1.37.2 built offline)\n"))

	code, stdout, _ := gauntlet("version")
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(MatchRegexp(`(?m)^kind: v0\.33\.0$`), "the kind module the binary was built with")
}
