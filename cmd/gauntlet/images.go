package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
)

// repoRoot is the Gauntlet checkout around the working directory (its
// Makefile builds the images), or "" outside one.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if strings.HasPrefix(string(b), "module github.com/gauntlet-dev/gauntlet\n") {
				if _, err := os.Stat(filepath.Join(d, "tools", "images")); err == nil {
					return d
				}
			}
			return ""
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// ensureDockerEngine makes sure a Docker engine answers: inside a
// Gauntlet checkout it starts one (ci/docker-engine.sh installs and starts
// Debian's); elsewhere it says none answers.
func ensureDockerEngine(ctx context.Context, prog *progress) error {
	err := exec.CommandContext(ctx, "docker", "info").Run()
	if err == nil {
		return nil
	}
	root := repoRoot()
	if root == "" {
		return fmt.Errorf("no Docker engine answers (docker info: %w); start one, or run from a Gauntlet checkout, whose ci/docker-engine.sh installs and starts Debian's", err)
	}
	if err := prog.Command(ctx, root, "ci/docker-engine.sh"); err != nil {
		return fmt.Errorf("starting a Docker engine: %w", err)
	}
	return nil
}

// prepareImages makes sure a Docker engine answers and every image the run
// loads into kind is present: inside a Gauntlet checkout it builds what is
// missing (each build step reuses what exists); elsewhere it names what is
// missing. The images are the node image, Chaos Mesh's and those the
// Operator file loads, with the run's variables.
func prepareImages(ctx context.Context, f *runFlags, prog *progress) error {
	root := repoRoot()
	prog.Phase("Docker engine")
	if err := ensureDockerEngine(ctx, prog); err != nil {
		return err
	}
	prog.Done()
	if root != "" && f.buildImages {
		prog.Phase("images")
		if targets := imageTargets(f); len(targets) > 0 {
			if err := prog.Command(ctx, root, "make", append([]string{"--no-print-directory"}, targets...)...); err != nil {
				return fmt.Errorf("building the images: %w", err)
			}
			builtImages(root, f)
		}
		prog.Done()
	}
	images := f.runImages()
	if f.kubeconfig == "" {
		images = append([]string{f.nodeImage}, images...)
	}
	var missing []string
	for _, img := range images {
		if strings.HasPrefix(img, "kindest/") {
			continue // kind pulls its upstream node images itself
		}
		if err := exec.CommandContext(ctx, "docker", "image", "inspect", img).Run(); err != nil {
			missing = append(missing, img)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("images missing from the Docker engine: %s (in a Gauntlet checkout, gauntlet run --build-images builds them; otherwise build them or set the Operator file's variables with --set)", strings.Join(missing, ", "))
	}
	return nil
}

// checkoutImage names an image this checkout's make images builds (the
// reference operator's, etcd's, the object store's), as opposed to one an
// adopter builds, or Chaos Mesh's and the node image, built by their own
// targets.
func checkoutImage(name string) bool {
	return strings.HasPrefix(name, "gauntlet.dev/") && !strings.HasPrefix(name, "gauntlet.dev/chaos-") &&
		!strings.HasPrefix(name, "gauntlet.dev/kind-node")
}

// imageTargets are the make targets for the images this run loads: the
// checkout's own only when the Operator file names one of them (an
// adopter's operator gets none of ours built), Chaos Mesh's and the node
// image when they are the checkout's. Each target reuses what exists.
func imageTargets(f *runFlags) []string {
	var targets []string
	vars := engine.Vars{Overrides: f.overrides, Defaults: f.loaded.Operator.Spec.Variables}
	for _, img := range f.loaded.Operator.Spec.Images {
		if checkoutImage(vars.Expand(img.Name)) {
			targets = append(targets, "images")
			break
		}
	}
	if strings.HasPrefix(f.chaosController, "gauntlet.dev/") || strings.HasPrefix(f.chaosDaemon, "gauntlet.dev/") {
		targets = append(targets, "chaos-images")
	}
	if f.usesRelay() && f.relayImage == engine.RelayImage {
		targets = append(targets, "relay-image")
	}
	if strings.HasPrefix(f.nodeImage, "gauntlet.dev/") && f.kubeconfig == "" {
		targets = append(targets, "node-image", "KIND_NODE_VERSION="+f.nodeImage[strings.LastIndex(f.nodeImage, ":")+1:])
	}
	return targets
}

// runImages are the images the run's cluster runs besides its nodes':
// Chaos Mesh's, the API relay's when it is used, and those the Operator
// file names, with the run's variables.
func (f *runFlags) runImages() []string {
	images := []string{f.chaosController, f.chaosDaemon}
	if f.usesRelay() || (f.kubeconfig != "" && f.proxyAddress == "" && (f.proxy || f.loaded.HasViewFaults())) {
		images = append(images, f.relayImage)
	}
	vars := engine.Vars{Overrides: f.overrides, Defaults: f.loaded.Operator.Spec.Variables}
	for _, img := range f.loaded.Operator.Spec.Images {
		images = append(images, vars.Expand(img.Name))
	}
	return images
}

// usesRelay says whether a kind cluster created here gets the API relay:
// asked for, and the files have view faults (or explore makes some).
func (f *runFlags) usesRelay() bool {
	return f.proxyRelay && (f.proxy || f.loaded.HasViewFaults())
}

// builtImages takes the image names this checkout's builds wrote: the
// operator's (for ${OPERATOR_IMAGE}, unless --set or the environment say
// otherwise) and Chaos Mesh's (unless the environment says).
func builtImages(root string, f *runFlags) {
	if env, err := readEnvFile(filepath.Join(root, "bin", "images.env")); err == nil && env["OPERATOR_IMAGE"] != "" && os.Getenv("OPERATOR_IMAGE") == "" {
		if _, set := f.set["OPERATOR_IMAGE"]; !set {
			f.overrides["OPERATOR_IMAGE"] = env["OPERATOR_IMAGE"]
		}
	}
	env, err := readEnvFile(filepath.Join(root, "bin", "chaos-mesh", "images.env"))
	if err != nil {
		return
	}
	if v := env["CHAOS_CONTROLLER_IMAGE"]; v != "" && os.Getenv("CHAOS_CONTROLLER_IMAGE") == "" {
		f.chaosController = v
	}
	if v := env["CHAOS_DAEMON_IMAGE"]; v != "" && os.Getenv("CHAOS_DAEMON_IMAGE") == "" {
		f.chaosDaemon = v
	}
}

// readEnvFile reads KEY=VALUE lines.
func readEnvFile(path string) (map[string]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}
