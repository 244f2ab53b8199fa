// Package layers checks that the chaos module's packages import only
// packages below them, so that the tree reads top-down: a package may
// use what is listed in a lower layer, never one beside or above it.
package layers

import (
	"errors"
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gauntlet-dev/gauntlet/"

// layers of the chaos module, lowest first. A new package gets a layer
// here: one above every chaos package it imports.
var layers = [][]string{
	// The file format, what a campaign tries, the workload's ledger:
	// nothing of the chaos module below them.
	{"chaos/scenario", "chaos/explore/space", "chaos/workload", "chaos/htmlreport/browser"},
	// What a run found; the files made concrete; which runs hold which fault.
	{"chaos/report", "chaos/render", "chaos/faultplan"},
	// Drivers and views that know a report or a file, not a run: Chaos
	// Mesh, the API relay, the Chaos Mesh install, the HTML report,
	// gauntlet init's starter files, the files checked before a run, the
	// comparison of two runs' end states, a resource's conditions over
	// time, which scenarios run side by side, the disruption-budget
	// oracle.
	{"chaos/chaosmesh", "chaos/relay", "chaos/install", "chaos/htmlreport", "chaos/starter", "chaos/preflight", "chaos/compare",
		"chaos/timeline", "chaos/parallel", "chaos/budget"},
	// envtest in place of nodes; a campaign as an Indexed Job; view
	// faults made of the API proxy; the oracles of a resource's deletion
	// (on compare's listing).
	{"chaos/envtesthost", "chaos/shard", "chaos/viewfault", "chaos/teardown"},
	// Run a scenario and judge it.
	{"chaos/engine"},
	// A campaign of runs the engine makes and judges.
	{"chaos/explore"},
}

func layerOf(pkg string) (int, bool) {
	for i, l := range layers {
		if slices.Contains(l, pkg) {
			return i, true
		}
	}
	return 0, false
}

// TestChaosPackagesImportOnlyBelowThem reads every package of chaos/
// (its non-test files) and fails on an import of a chaos package in the
// same layer or above, and on a package with no layer.
func TestChaosPackagesImportOnlyBelowThem(t *testing.T) {
	root := filepath.Join("..", "..")
	var seen []string
	err := filepath.WalkDir(filepath.Join(root, "chaos"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		if noGo := (*build.NoGoError)(nil); errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		seen = append(seen, pkg)
		mine, ok := layerOf(pkg)
		if !ok {
			t.Errorf("%s has no layer: add it to layers in ci/layers, above every chaos package it imports", pkg)
			return nil
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok || !strings.HasPrefix(dep, "chaos/") {
				continue
			}
			if theirs, known := layerOf(dep); !known || theirs >= mine {
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only what is below it", pkg, mine, dep, theirs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		for _, pkg := range l {
			if !slices.Contains(seen, pkg) {
				t.Errorf("layers names %s, which is not a package of chaos/ any more", pkg)
			}
		}
	}
}
