package cluster

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// NodeImage is one Kubernetes minor's kind node image, from where users
// get it and as this repository builds it without a registry.
type NodeImage struct {
	// Minor is the Kubernetes minor, "1.35".
	Minor string
	// Upstream is the image kind publishes for the minor (kind v0.31.0
	// defaults to v1.35.0, v0.33.0 to v1.37.0; v1.36.1 was the default
	// between): pulled where a registry answers.
	Upstream string
	// Offline is the image tools/images/node builds from Go modules and
	// Debian packages (make node-image KUBERNETES_VERSION=...).
	Offline string
}

// NodeImages are the minors the harness runs on, oldest first; the first
// is the default.
var NodeImages = []NodeImage{
	{Minor: "1.35", Upstream: "kindest/node:v1.35.0", Offline: DefaultNodeImage},
	{Minor: "1.36", Upstream: "kindest/node:v1.36.1", Offline: "gauntlet.dev/kind-node:v1.36.3"},
	{Minor: "1.37", Upstream: "kindest/node:v1.37.0", Offline: "gauntlet.dev/kind-node:v1.37.2"},
}

// NodeImageFor is the node image of a minor, given as "1.36", "v1.36" or
// a full version such as "1.36.3".
func NodeImageFor(version string) (NodeImage, error) {
	v := strings.TrimPrefix(version, "v")
	if parts := strings.Split(v, "."); len(parts) >= 2 {
		v = parts[0] + "." + parts[1]
	}
	i := slices.IndexFunc(NodeImages, func(n NodeImage) bool { return n.Minor == v })
	if i < 0 {
		minors := make([]string, len(NodeImages))
		for k, n := range NodeImages {
			minors[k] = n.Minor
		}
		return NodeImage{}, fmt.Errorf("no kind node image known for Kubernetes %q: give one of %s", version, strings.Join(minors, ", "))
	}
	return NodeImages[i], nil
}

// KindConfigFor names the built-in kind config (KindConfig) that a
// cluster made from image needs: kind's own CNI for an upstream image,
// podnet for the offline 1.36+ images, and for the offline 1.35 image (and
// any other) the bridge CNI the harness routes between nodes.
func KindConfigFor(image string, multiNode bool) string {
	name := "single-node"
	if multiNode {
		name = "multi-node"
	}
	switch {
	case strings.HasPrefix(image, "kindest/node:"):
		name += "-upstream"
	case strings.HasPrefix(image, "gauntlet.dev/kind-node:") && image != DefaultNodeImage:
		name += "-podnet"
	}
	return name
}

// kindConfigs are the kind configs KindConfigFor names, built into the
// binary: a run needs no checkout to make its cluster.
//
//go:embed kindconfig/*.yaml
var kindConfigs embed.FS

// KindConfig is the built-in kind config of that name.
func KindConfig(name string) ([]byte, error) {
	b, err := kindConfigs.ReadFile("kindconfig/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no built-in kind config %q", name)
	}
	return b, nil
}

// KindConfigFile writes the built-in kind config of that name under the
// user's cache folder (gauntlet/kind/<name>.yaml), for kind and for
// scripts that make their own cluster, and returns its path.
func KindConfigFile(name string) (string, error) {
	b, err := KindConfig(name)
	if err != nil {
		return "", err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "gauntlet", "kind")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".yaml")
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, b) {
		return path, nil
	}
	return path, os.WriteFile(path, b, 0o644)
}
