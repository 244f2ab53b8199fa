package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// mirrorName is where an image goes in a registry that mirrors its own
// registry: the same repository path and tag under the mirror's host, as
// containerd asks a mirror for it (gauntlet.dev/etcd:v3.6.16 →
// registry:5001/etcd:v3.6.16; busybox → registry:5001/library/busybox).
func mirrorName(image, registry string) (string, error) {
	ref, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	repo := ref.Context().RepositoryStr()
	switch r := ref.(type) {
	case name.Tag:
		return registry + "/" + repo + ":" + r.TagStr(), nil
	case name.Digest:
		return registry + "/" + repo + "@" + r.DigestStr(), nil
	}
	return "", fmt.Errorf("image %q: neither a tag nor a digest", image)
}

// pushImages pushes the run's images from this machine's Docker engine to
// registry, each at its own path (mirrorName), for an existing cluster
// whose nodes mirror the images' registries to it: the manifests keep
// the names they have, and nothing is rewritten.
func pushImages(ctx context.Context, f *runFlags, prog *progress) error {
	prog.Phase("push to " + f.pushTo)
	defer prog.Done()
	for _, img := range f.runImages() {
		target, err := mirrorName(img, f.pushTo)
		if err != nil {
			return err
		}
		start := time.Now()
		for _, args := range [][]string{{"tag", img, target}, {"push", "--quiet", target}} {
			if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			}
		}
		prog.Printf("pushed %s as %s in %s", img, target, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}
