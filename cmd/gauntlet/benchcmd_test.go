package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/cmd/gauntlet/bench"
)

func TestBenchTableAndCompare(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	goOut := filepath.Join(dir, "unit.txt")
	g.Expect(os.WriteFile(goOut, []byte("pkg: example.com/m/suites/unit\nBenchmarkReconcileConverged-2 1000 250000 ns/op 0 writes/op\n"), 0o644)).To(Succeed())
	scale := filepath.Join(dir, "scale.json")
	g.Expect(bench.WriteFigures(scale, []bench.Figure{
		{Name: "envtest scale: reconcile p99", Value: 90, Unit: "ms", Better: bench.LowerIsBetter, Note: "N=200", Goal: &bench.Goal{Value: 100}},
	})).To(Succeed())

	a := filepath.Join(dir, "a")
	code, out, errOut := gauntlet("bench", "table", "--out", a, "--commit", "abc", goOut, "--figures", scale)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("wrote 3 figures"))
	md, err := os.ReadFile(filepath.Join(a, bench.MarkdownName))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(md)).To(ContainSubstring("| unit.BenchmarkReconcileConverged time/op | 250 µs/op | — |"))
	g.Expect(string(md)).To(ContainSubstring("| envtest scale: reconcile p99 (N=200) | 90.0 ms | ≤ 100 ms (met) |"))

	// The same figures compare clean; a slower reconcile is a regression.
	code, out, _ = gauntlet("bench", "compare", a, filepath.Join(a, bench.MarkdownName))
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(ContainSubstring("0 regression(s) beyond 10%"))

	g.Expect(os.WriteFile(goOut, []byte("pkg: example.com/m/suites/unit\nBenchmarkReconcileConverged-2 1000 300000 ns/op 0 writes/op\n"), 0o644)).To(Succeed())
	b := filepath.Join(dir, "b")
	code, _, errOut = gauntlet("bench", "table", "--out", b, goOut, "--figures", scale)
	g.Expect(code).To(Equal(0), errOut)
	code, out, _ = gauntlet("bench", "compare", a, b)
	g.Expect(code).To(Equal(1))
	g.Expect(out).To(MatchRegexp(`unit.BenchmarkReconcileConverged time/op\s+250 µs/op\s+300 µs/op\s+\+20.0%\s+REGRESSION`))
	code, _, _ = gauntlet("bench", "compare", "--threshold", "0.25", a, b)
	g.Expect(code).To(Equal(0))

	code, _, errOut = gauntlet("bench", "table", goOut)
	g.Expect(code).To(Equal(2))
	g.Expect(errOut).To(ContainSubstring("--out is required"))
	code, _, errOut = gauntlet("bench", "compare", a)
	g.Expect(code).To(Equal(2))
	g.Expect(errOut).To(ContainSubstring("want 2 arguments"))
	empty := filepath.Join(dir, "empty.txt")
	g.Expect(os.WriteFile(empty, []byte("PASS\n"), 0o644)).To(Succeed())
	code, _, errOut = gauntlet("bench", "table", "--out", filepath.Join(dir, "c"), empty)
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(ContainSubstring("holds no benchmark result"))
}
