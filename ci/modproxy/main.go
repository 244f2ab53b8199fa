// Command modproxy writes a Go module proxy, as a folder GOPROXY=file://
// reads, that serves this repository's modules at one version, as a
// release would publish them: each library module (framework, cluster,
// chaos, operator) and the root module, whose go.sum files then hold the
// sums of the versions they require, computed from the zips served. It
// lets `go install github.com/gauntlet-dev/gauntlet/cmd/gauntlet@VERSION`
// run in an empty folder before any tag is pushed (ci/install-proof.sh).
//
// Usage:
//
//	go run ./ci/modproxy -src TREE -version v0.1.0 -out PROXY
//
// TREE is a plain copy of the repository (git archive HEAD); its go.mod
// files are rewritten to require each other at VERSION, and its go.sum
// files to hold their sums. A version other than the one the go.mod files
// name (ci/install-proof.sh gives one per commit) keeps a module cache
// from serving an older tree's modules under the same version.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// released are the repository's modules by folder, in an order where each
// requires only those before it.
var released = []string{"framework", "cluster", "chaos", "operator", "."}

func main() {
	src := flag.String("src", "", "a plain copy of the repository (required; its go.sum files are rewritten)")
	version := flag.String("version", "v0.1.0", "the version every module is served at")
	out := flag.String("out", "", "the proxy folder to write (required)")
	flag.Parse()
	if *src == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(*src, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// write serves each module in turn, after setting its requirements of
// those already served to version and adding their sums to its go.sum.
func write(src, version, out string) error {
	sums := map[string][]string{} // module path: its two go.sum lines
	for _, dir := range released {
		dir = filepath.Join(src, dir)
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return err
		}
		f, err := modfile.Parse("go.mod", gomod, nil)
		if err != nil {
			return err
		}
		var add []string
		for _, r := range f.Require {
			if lines, ok := sums[r.Mod.Path]; ok {
				if err := f.AddRequire(r.Mod.Path, version); err != nil {
					return err
				}
				add = append(add, lines...)
			}
		}
		if gomod, err = f.Format(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
			return err
		}
		if err := appendSums(filepath.Join(dir, "go.sum"), add); err != nil {
			return err
		}
		mv := module.Version{Path: f.Module.Mod.Path, Version: version}
		lines, err := serve(dir, mv, gomod, out)
		if err != nil {
			return fmt.Errorf("%s: %w", mv, err)
		}
		sums[mv.Path] = lines
		fmt.Printf("served %s from %s\n", mv, dir)
	}
	return nil
}

// serve writes the module's .info, .mod, .zip and list into the proxy
// folder and returns its go.sum lines.
func serve(dir string, mv module.Version, gomod []byte, out string) ([]string, error) {
	escaped, err := module.EscapePath(mv.Path)
	if err != nil {
		return nil, err
	}
	at := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return nil, err
	}
	zipPath := filepath.Join(at, mv.Version+".zip")
	z, err := os.Create(zipPath)
	if err != nil {
		return nil, err
	}
	if err := modzip.CreateFromDir(z, mv, dir); err != nil {
		_ = z.Close()
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	info, err := json.Marshal(map[string]any{"Version": mv.Version, "Time": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{mv.Version + ".info": info, mv.Version + ".mod": gomod, "list": []byte(mv.Version + "\n")} {
		if err := os.WriteFile(filepath.Join(at, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	h, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		return nil, err
	}
	hmod, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gomod)), nil
	})
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("%s %s %s", mv.Path, mv.Version, h),
		fmt.Sprintf("%s %s/go.mod %s", mv.Path, mv.Version, hmod),
	}, nil
}

// appendSums adds lines to a go.sum that lacks them.
func appendSums(path string, lines []string) error {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(b)
	for _, l := range lines {
		if !strings.Contains(text, l+"\n") {
			text += l + "\n"
		}
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
