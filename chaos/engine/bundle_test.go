package engine

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// A run's bundle is written once: a folder that holds the operator
// namespace's part already is left as it is (a nil config would fail
// any collection).
func TestBundleOnce(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "ops"), 0o755)).To(Succeed())
	e := &Engine{o: Options{Log: io.Discard}, operator: &scenario.OperatorSpec{Namespace: "ops"}}
	e.bundle(t.Context(), dir, "run-ns")
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "nothing collected again")
}
