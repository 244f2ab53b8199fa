package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
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
	code, out, _ = gauntlet("bench", "compare", "--speed-threshold", "0.25", a, b)
	g.Expect(code).To(Equal(0), "a time 20%% slower, within the speed threshold")
	g.Expect(out).To(ContainSubstring("beyond 10% (times and rates: 25%)"))
	code, _, errOut = gauntlet("bench", "compare", "--speed-threshold", "-1", a, b)
	g.Expect(code).To(Equal(2))
	g.Expect(errOut).To(ContainSubstring("must not be negative"))

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

// A campaign's figures say how many fields it changed against how many
// it generated for, and how soon it changed them all (or that it did not).
func TestExploreFigures(t *testing.T) {
	g := NewWithT(t)
	x := &report.Campaign{Base: "base", Seed: 1, Fields: []string{"spec.a", "spec.b"}, Covered: []string{"spec.a", "spec.b"},
		AllCoveredAfter: 90 * time.Second, Took: 3 * time.Minute, Runs: 9, StepsPerMinute: 4}
	figs := exploreFigures(x)
	byName := map[string]bench.Figure{}
	for _, f := range figs {
		byName[f.Name] = f
	}
	covered := byName["explore: fields changed by some run"]
	g.Expect(covered.Value).To(Equal(2.0))
	met, ok := covered.Met()
	g.Expect(ok && met).To(BeTrue())
	all := byName["explore: time to change every field"]
	g.Expect(all.Value).To(Equal(1.5))
	met, _ = all.Met()
	g.Expect(met).To(BeTrue(), "within 30 minutes")
	g.Expect(byName["explore: findings"].Value).To(Equal(0.0))

	x.Covered, x.AllCoveredAfter = x.Covered[:1], 0
	all = exploreFigures(x)[1]
	met, _ = all.Met()
	g.Expect(met).To(BeFalse(), "not every field: the goal is not met")
	g.Expect(all.Note).To(ContainSubstring("not every field"))
}
