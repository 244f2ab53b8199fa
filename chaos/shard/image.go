package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ImageRepository is the shard image's name; its tag is a digest of the
// bundle, so an unchanged bundle reuses the image already built.
const ImageRepository = "gauntlet.dev/explore-shard"

// dockerfile makes the shard image from the bundle alone: every program
// in it is static, so it needs no base.
const dockerfile = `# Written by gauntlet: a shard of a campaign (explore --shards, bench bugs --job).
FROM scratch
COPY --chown=65532:65532 . /gauntlet/
USER 65532:65532
ENTRYPOINT ["/gauntlet/bin/gauntlet"]
`

// BuildImage builds the shard image of the bundle in dir with the local
// Docker engine, or reuses the one built from the same bundle, and
// returns its name.
func BuildImage(ctx context.Context, dir string, logf func(string, ...any)) (string, error) {
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	sum, err := digest(dir)
	if err != nil {
		return "", fmt.Errorf("hashing the shard bundle: %w", err)
	}
	image := ImageRepository + ":" + sum[:12]
	if exec.CommandContext(ctx, "docker", "image", "inspect", image).Run() == nil {
		logf("shard image %s is built already (same bundle)", image)
		return image, nil
	}
	start := time.Now()
	logf("building shard image %s", image)
	out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", image, dir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker build of the shard image: %w: %s", err, strings.TrimSpace(string(out)))
	}
	logf("built shard image %s in %s", image, time.Since(start).Round(100*time.Millisecond))
	return image, nil
}

// digest hashes every file's path and content under dir.
func digest(dir string) (string, error) {
	h := sha256.New()
	err := eachFile(dir, func(rel, path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, _ = fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, f)
		return err
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// eachFile calls fn with every regular file under dir, in lexical order:
// its slash-separated path relative to dir, and its path.
func eachFile(dir string, fn func(rel, path string) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), path)
	})
}
