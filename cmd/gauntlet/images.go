package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/chaos/relay"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/cluster"
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
// Operator file loads, with the run's variables. For a kind cluster made
// here, the images kind does not need to start (the operator's, etcd's,
// the relay's) are built while it makes the cluster: f.imagesReady waits
// for them.
func prepareImages(ctx context.Context, f *runFlags, prog *progress) error {
	root := repoRoot()
	prog.Phase("Docker engine")
	if err := ensureDockerEngine(ctx, prog); err != nil {
		return err
	}
	prog.Done()
	if f.kubeconfig == "" {
		prog.Phase("node image")
		if err := f.resolveNodeImage(ctx, prog); err != nil {
			return err
		}
		prog.Done()
	}
	prog.Phase("Chaos Mesh images")
	f.resolveChaosImages(ctx, prog)
	prog.Done()
	var later []string
	if root != "" && f.buildImages {
		now := imageTargets(f)
		if f.kubeconfig == "" {
			now, later = splitLater(now)
		}
		prog.Phase("images")
		if len(now) > 0 {
			if err := makeImages(ctx, root, now, prog); err != nil {
				return err
			}
			builtChaosImages(root, f)
		}
		prog.Done()
	}
	if len(later) == 0 {
		return checkImages(ctx, f.imagesToLoad())
	}
	if err := checkImages(ctx, []string{f.nodeImage, f.chaosController, f.chaosDaemon}); err != nil {
		return err
	}
	start := time.Now()
	prog.Printf("images: making %s while kind makes the cluster", strings.Join(later, ", "))
	done := make(chan error, 1)
	go func() {
		err := makeImages(ctx, root, later, prog)
		if err == nil {
			prog.Printf("images: %s made in %s", strings.Join(later, ", "), time.Since(start).Round(100*time.Millisecond))
		}
		done <- err
	}()
	f.imagesReady = func(ctx context.Context) error {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		return checkImages(ctx, f.imagesToLoad())
	}
	return nil
}

// laterTargets build images a kind cluster does not need to start.
var laterTargets = []string{"operator-image", "etcd-images", "versitygw-image", "relay-image"}

// splitLater splits make targets into those needed before kind makes the
// cluster (the node image, Chaos Mesh's, whose choice is made before)
// and those that can wait until it has.
func splitLater(targets []string) (now, later []string) {
	for _, t := range targets {
		if slices.Contains(laterTargets, t) {
			later = append(later, t)
		} else {
			now = append(now, t)
		}
	}
	return now, later
}

// makeImages runs the checkout's make targets.
func makeImages(ctx context.Context, root string, targets []string, prog *progress) error {
	if err := prog.Command(ctx, root, "make", append([]string{"--no-print-directory"}, targets...)...); err != nil {
		return fmt.Errorf("building the images: %w", err)
	}
	return nil
}

// imagesToLoad are the node image of a kind cluster made here and every
// image the run's cluster runs.
func (f *runFlags) imagesToLoad() []string {
	images := f.runImages()
	if f.kubeconfig == "" {
		images = append([]string{f.nodeImage}, images...)
	}
	return images
}

// checkImages fails, naming them, when images are missing from the
// Docker engine (kind's upstream node images aside: kind pulls those).
func checkImages(ctx context.Context, images []string) error {
	var missing []string
	for _, img := range images {
		if strings.HasPrefix(img, "kindest/") {
			continue
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

// pullTimeout bounds pulling kind's node image (about 1 GB).
const pullTimeout = 5 * time.Minute

// resolveNodeImage settles the node image and the kind config of a
// cluster made here. --node-image is taken as given; otherwise kind's
// upstream image for --kubernetes-version when the Docker engine has it
// or pulls it, else (with --offline at once) the one this checkout builds.
// Each choice is printed with its reason. The config is the one
// built in for the image (cluster.KindConfig), unless --kind-config names one.
func (f *runFlags) resolveNodeImage(ctx context.Context, prog *progress) error {
	if f.nodeImage == "" {
		ni, _ := cluster.NodeImageFor(f.kubernetesVersion) // checked by validate
		f.nodeImage = pickNodeImage(ctx, ni, f.offline, prog)
	}
	if f.kindConfig == "" {
		path, err := cluster.KindConfigFile(cluster.KindConfigFor(f.nodeImage, f.multiNode))
		if err != nil {
			return err
		}
		f.kindConfig = path
	}
	return nil
}

// pickNodeImage is kind's image for the minor when the engine has it or
// pulls it, else the one built offline.
func pickNodeImage(ctx context.Context, ni cluster.NodeImage, offline bool, prog *progress) string {
	return pickImages(ctx, "node image", []string{ni.Upstream}, []string{ni.Offline}, offline, prog)[0]
}

// resolveChaosImages settles Chaos Mesh's images: as given
// (--chaos-controller-image, --chaos-daemon-image or the environment),
// else the release images in --chaos-mesh-registry when the engine has
// them or pulls them, else (with --offline at once) the ones this
// checkout builds. The choice is printed with its reason.
func (f *runFlags) resolveChaosImages(ctx context.Context, prog *progress) {
	if f.chaosController != "" && f.chaosDaemon != "" {
		return
	}
	ctrl, daemon := install.ReleaseImages(f.chaosRegistry)
	got := pickImages(ctx, "Chaos Mesh images", []string{ctrl, daemon},
		[]string{install.DefaultControllerImage, install.DefaultDaemonImage}, f.offline, prog)
	if f.chaosController == "" {
		f.chaosController = got[0]
	}
	if f.chaosDaemon == "" {
		f.chaosDaemon = got[1]
	}
}

// pickImages is upstream when the Docker engine has every image of it or
// pulls those it lacks (within pullTimeout in all), else offline, the
// images a checkout builds; with offlineOnly nothing is pulled. What it
// took, and why, is printed under what.
func pickImages(ctx context.Context, what string, upstream, offline []string, offlineOnly bool, prog *progress) []string {
	names := func(images []string) string { return strings.Join(images, " and ") }
	if offlineOnly {
		prog.Printf("%s: %s (--offline: nothing is pulled; built here when missing)", what, names(offline))
		return offline
	}
	var missing []string
	for _, img := range upstream {
		if exec.CommandContext(ctx, "docker", "image", "inspect", img).Run() != nil {
			missing = append(missing, img)
		}
	}
	if len(missing) == 0 {
		prog.Printf("%s: %s, already in the Docker engine", what, names(upstream))
		return upstream
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	for _, img := range missing {
		out, err := exec.CommandContext(pctx, "docker", "pull", "-q", img).CombinedOutput()
		if err == nil {
			continue
		}
		why := strings.TrimSpace(string(out))
		if i := strings.LastIndexByte(why, '\n'); i >= 0 {
			why = why[i+1:]
		}
		if pctx.Err() != nil {
			why = fmt.Sprintf("no answer in %s", pullTimeout)
		}
		prog.Printf("%s: pulling %s failed (%s); %s instead, built here when missing", what, img, why, names(offline))
		return offline
	}
	prog.Printf("%s: pulled %s in %s", what, names(missing), time.Since(start).Round(100*time.Millisecond))
	return upstream
}

// validImage says whether ref is a well-formed image reference.
func validImage(ref string) bool {
	_, err := name.ParseReference(ref, name.StrictValidation)
	return err == nil && !strings.ContainsAny(ref, " @")
}

// buildNodeImage builds an offline node image (gauntlet.dev/kind-node)
// that the Docker engine lacks, in a Gauntlet checkout (make node-image
// reuses what exists); other images are left to kind.
func buildNodeImage(ctx context.Context, image string, prog *progress) error {
	tag, ok := strings.CutPrefix(image, "gauntlet.dev/kind-node:")
	if !ok || exec.CommandContext(ctx, "docker", "image", "inspect", image).Run() == nil {
		return nil
	}
	root := repoRoot()
	if root == "" {
		return fmt.Errorf("node image %s is missing from the Docker engine: build it in a Gauntlet checkout (make node-image KUBERNETES_VERSION=%s), or give --node-image", image, tag)
	}
	if err := prog.Command(ctx, root, "make", "--no-print-directory", "node-image", "KIND_NODE_VERSION="+tag); err != nil {
		return fmt.Errorf("building the node image %s: %w", image, err)
	}
	return nil
}

// checkoutTargets are the make targets that build this checkout's images
// (the reference operator's, etcd's, the object store's), by name prefix.
// Chaos Mesh's images and the node image have targets of their own, and
// an adopter's images are the adopter's to build.
var checkoutTargets = []struct{ prefix, target string }{
	{"gauntlet.dev/operator:", "operator-image"},
	{"gauntlet.dev/etcd:", "etcd-images"},
	{"gauntlet.dev/versitygw:", "versitygw-image"},
}

// imageTargets are the make targets for the images this run loads: those
// of the checkout's images the Operator file names (an adopter's operator
// gets none of ours built), Chaos Mesh's and the node image when they are
// the checkout's. Each target reuses what exists.
func imageTargets(f *runFlags) []string {
	var targets []string
	add := func(t string) {
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	vars := render.Vars{Overrides: f.overrides, Defaults: f.loaded.Operator.Spec.Variables}
	for _, img := range f.loaded.Operator.Spec.Images {
		name := vars.Expand(img.Name)
		for _, ct := range checkoutTargets {
			if strings.HasPrefix(name, ct.prefix) {
				add(ct.target)
			}
		}
	}
	if strings.HasPrefix(f.chaosController, "gauntlet.dev/") || strings.HasPrefix(f.chaosDaemon, "gauntlet.dev/") {
		add("chaos-images")
	}
	if f.usesRelay() && f.relayImage == relay.Image {
		add("relay-image")
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
	vars := render.Vars{Overrides: f.overrides, Defaults: f.loaded.Operator.Spec.Variables}
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

// builtChaosImages takes Chaos Mesh's image names from its build's
// images.env when the run uses the images built here.
func builtChaosImages(root string, f *runFlags) {
	env, err := readEnvFile(filepath.Join(root, "bin", "chaos-mesh", "images.env"))
	if err != nil || !strings.HasPrefix(f.chaosController, "gauntlet.dev/") {
		return // release images, or images given
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
