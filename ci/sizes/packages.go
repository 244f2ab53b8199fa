package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// packageLimits cap the packages under a tree: every folder of non-test
// Go files under root holds at most max lines of them, unless allowed
// names the folder (relative to root's parent, as "chaos/engine") with a
// larger cap of its own.
type packageLimits struct {
	root    string
	max     int
	allowed allowances
}

// allowances are -package-allow DIR=N flags.
type allowances map[string]int

func (a allowances) String() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		out = append(out, fmt.Sprintf("%s=%d", k, a[k]))
	}
	return strings.Join(out, ",")
}

func (a allowances) Set(s string) error {
	dir, n, ok := strings.Cut(s, "=")
	lines, err := strconv.Atoi(n)
	if !ok || err != nil || lines <= 0 {
		return fmt.Errorf("want DIR=LINES, got %q", s)
	}
	a[filepath.Clean(dir)] = lines
	return nil
}

// checkPackages returns each package under pl.root over its cap. Test
// files and generated files do not count: the cap is on what a reader of
// the package's code must hold.
func checkPackages(pl packageLimits) ([]finding, error) {
	files, err := goFiles(pl.root)
	if err != nil {
		return nil, err
	}
	lines := map[string]int{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if ast.IsGenerated(f) {
			continue
		}
		lines[filepath.Dir(path)] += lineCount(src)
	}
	var found []finding
	for _, dir := range slices.Sorted(maps.Keys(lines)) {
		max := pl.max
		if n, ok := pl.allowed[filepath.Clean(dir)]; ok {
			max = n
		}
		if lines[dir] > max {
			found = append(found, finding{path: dir, what: "package", lines: lines[dir], max: max})
		}
	}
	return found, nil
}
