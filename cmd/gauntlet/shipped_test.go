package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// shippedFolders are the scenario folders this repository ships: the
// reference operator's, the view tier's and every example operator's.
func shippedFolders(t *testing.T) []string {
	var dirs []string
	for _, pattern := range []string{"../../suites/chaos/scenarios", "../../suites/view/scenarios",
		"../../suites/examples/*/scenarios", "../../suites/examples/*/view-scenarios"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, m...)
	}
	return dirs
}

// TestShippedFoldersLoad: every scenario folder shipped passes the checks
// gauntlet validate makes of the files, and each Scenario and Operator
// file matches the JSON Schema editors are given (gauntlet schema).
func TestShippedFoldersLoad(t *testing.T) {
	dirs := shippedFolders(t)
	NewWithT(t).Expect(dirs).To(HaveLen(6), "the reference operator's chaos and view folders, Memcached's two, Mirror's and ZooKeeper's view folders")
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			set, err := scenario.LoadPaths(dir)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(set.Scenarios).NotTo(BeEmpty())
			files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			for _, f := range files {
				y, err := os.ReadFile(f)
				g.Expect(err).NotTo(HaveOccurred())
				_, err = scenario.MatchDocument(y)
				g.Expect(err).NotTo(HaveOccurred(), f)
			}
		})
	}
}

// TestSchemaCommand: the schemas are in the binary, for a user with no
// checkout; an unknown name is a usage error.
func TestSchemaCommand(t *testing.T) {
	g := NewWithT(t)
	for name, id := range map[string]string{
		"scenario": "https://gauntlet.dev/schemas/scenario.schema.json",
		"operator": "https://gauntlet.dev/schemas/operator.schema.json",
		"report":   "https://gauntlet.dev/schemas/chaos-report-v1alpha1.json",
	} {
		code, out, stderr := gauntlet("schema", name)
		g.Expect(code).To(Equal(0), stderr)
		g.Expect(out).To(ContainSubstring(`"$id": "`+id+`"`), name)
	}
	code, _, stderr := gauntlet("schema", "cluster")
	g.Expect(code).To(Equal(2))
	g.Expect(stderr).To(ContainSubstring(`no schema "cluster": give one of operator, report, scenario`))
}
