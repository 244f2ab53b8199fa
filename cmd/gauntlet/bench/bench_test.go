package bench

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const goTestOutput = `goos: linux
goarch: amd64
pkg: github.com/gauntlet-dev/gauntlet/suites/unit
cpu: Intel(R) Xeon(R) Processor @ 2.90GHz
BenchmarkReconcileConverged-2   	   10000	    120000 ns/op	         0 writes/op	   52000 B/op	     610 allocs/op
BenchmarkReconcileConverged-2   	   10000	    100000 ns/op	         0 writes/op	   52000 B/op	     610 allocs/op
BenchmarkReconcileConverged-2   	   10000	    140000 ns/op	         0 writes/op	   52000 B/op	     610 allocs/op
PASS
ok  	github.com/gauntlet-dev/gauntlet/suites/unit	4.1s
goos: linux
goarch: amd64
pkg: github.com/gauntlet-dev/gauntlet/suites/simulation
BenchmarkSchedules-2   	     300	  50000000 ns/op	      1200 schedules/min
PASS
`

func TestParseGoTest(t *testing.T) {
	g := NewWithT(t)
	figs, err := ParseGoTest(strings.NewReader(goTestOutput), "bench.txt")
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]Figure{}
	for _, f := range figs {
		byName[f.Name] = f
	}
	g.Expect(figs).To(HaveLen(6))
	// The median of three runs, in µs.
	g.Expect(byName["unit.BenchmarkReconcileConverged time/op"]).To(Equal(Figure{
		Name: "unit.BenchmarkReconcileConverged time/op", Value: 120, Unit: "µs/op", Better: LowerIsBetter}))
	g.Expect(byName["unit.BenchmarkReconcileConverged allocs/op"].Value).To(Equal(610.0))
	g.Expect(byName["unit.BenchmarkReconcileConverged writes/op"].Value).To(Equal(0.0))
	sched := byName["simulation.BenchmarkSchedules schedules/min"]
	g.Expect(sched.Value).To(Equal(1200.0))
	g.Expect(sched.Better).To(Equal(HigherIsBetter))
	g.Expect(byName["simulation.BenchmarkSchedules time/op"].Value).To(Equal(50000.0))
}

func TestParseGoTestRefusesBrokenLines(t *testing.T) {
	g := NewWithT(t)
	_, err := ParseGoTest(strings.NewReader("BenchmarkX-2 10 abc ns/op\n"), "bad.txt")
	g.Expect(err).To(MatchError(ContainSubstring("bad.txt:1")))
}

func sampleTable() Table {
	return Table{
		Time:    time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC),
		Commit:  "abc1234",
		Note:    "Measured while the machine was busy.",
		Machine: Machine{CPU: "Test CPU", Cores: 2, MemoryGB: "24 GiB", Go: "go1.26.0", OS: "linux/amd64"},
		Figures: []Figure{
			{Name: "envtest scale: reconcile p99", Value: 80, Unit: "ms", Better: LowerIsBetter, Note: "N=200", Goal: &Goal{Value: 100, Source: "issue 16"}},
			{Name: "envtest scale: time to converge", Value: 150, Unit: "s", Better: LowerIsBetter, Note: "N=1000", Goal: &Goal{Value: 120, Source: "issue 16"}},
			{Name: "simulation.BenchmarkSchedules schedules/min", Value: 1234.5, Unit: "schedules/min", Better: HigherIsBetter},
		},
	}
}

func TestWriteMarkdown(t *testing.T) {
	g := NewWithT(t)
	var b bytes.Buffer
	g.Expect(WriteMarkdown(&b, sampleTable())).To(Succeed())
	machine := "Test CPU, 2 cores, 24 GiB, go1.26.0, linux/amd64"
	g.Expect(b.String()).To(Equal("# Benchmarks\n\nMeasured 2026-11-25T09:30:00Z at commit abc1234 by `make bench`.\n\nMeasured while the machine was busy.\n\n" +
		"| figure | value | goal | machine |\n|---|---|---|---|\n" +
		"| envtest scale: reconcile p99 (N=200) | 80.0 ms | ≤ 100 ms (met), issue 16 | " + machine + " |\n" +
		"| envtest scale: time to converge (N=1000) | 150 s | ≤ 120 s (**not met**), issue 16 | " + machine + " |\n" +
		"| simulation.BenchmarkSchedules schedules/min | 1234 schedules/min | — | " + machine + " |\n"))
}

func TestFilesRoundTrip(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	want := sampleTable()
	g.Expect(WriteFiles(dir, want)).To(Succeed())
	g.Expect(filepath.Join(dir, MarkdownName)).To(BeARegularFile())
	for _, path := range []string{dir, filepath.Join(dir, JSONName), filepath.Join(dir, MarkdownName)} {
		got, err := ReadTable(path)
		g.Expect(err).NotTo(HaveOccurred(), path)
		g.Expect(got).To(Equal(want), path)
	}
	_, err := ReadTable(filepath.Join(t.TempDir(), "none"))
	g.Expect(err).To(MatchError(ContainSubstring("reading a benchmark table")))

	figs := filepath.Join(dir, "figs.json")
	g.Expect(WriteFigures(figs, want.Figures)).To(Succeed())
	back, err := ReadFigures(figs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(want.Figures))
	g.Expect(os.WriteFile(figs, []byte("{"), 0o644)).To(Succeed())
	_, err = ReadFigures(figs)
	g.Expect(err).To(MatchError(ContainSubstring("reading figures from")))
}

func TestCompare(t *testing.T) {
	g := NewWithT(t)
	a := sampleTable()
	b := sampleTable()
	b.Figures = []Figure{
		// p99 82 ms: +2.5%, within 10%.
		{Name: "envtest scale: reconcile p99", Value: 82, Unit: "ms", Better: LowerIsBetter, Note: "N=200"},
		// converge 90 s: 40% better.
		{Name: "envtest scale: time to converge", Value: 90, Unit: "s", Better: LowerIsBetter, Note: "N=1000"},
		// schedules/min down 20%: worse, since higher is better.
		{Name: "simulation.BenchmarkSchedules schedules/min", Value: 987.6, Unit: "schedules/min", Better: HigherIsBetter},
		{Name: "new figure", Value: 1, Better: LowerIsBetter},
	}
	changes := Compare(a, b, Thresholds{Count: 0.10, Speed: 0.10})
	g.Expect(changes).To(HaveLen(4))
	g.Expect(changes[0].Regressed || changes[0].Improved).To(BeFalse())
	g.Expect(changes[0].Percent).To(BeNumerically("~", 2.5, 1e-9))
	g.Expect(changes[1].Improved).To(BeTrue())
	g.Expect(changes[2].Regressed).To(BeTrue())
	g.Expect(changes[2].Percent).To(BeNumerically("~", -20, 1e-6))
	g.Expect(changes[3].Old).To(BeNil())
	g.Expect(math.IsNaN(changes[3].Percent)).To(BeTrue())

	// The same figure at another N is another figure.
	c := sampleTable()
	c.Figures[0].Note = "N=1000"
	byN := Compare(a, c, Thresholds{Count: 0.10, Speed: 0.10})
	g.Expect(byN).To(HaveLen(4))

	var out bytes.Buffer
	n, err := WriteComparison(&out, a, b, changes, Thresholds{Count: 0.10, Speed: 0.10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	g.Expect(out.String()).To(MatchRegexp(`reconcile p99 \(N=200\)\s+80.0 ms\s+82.0 ms\s+\+2.5%\s*\n`))
	g.Expect(out.String()).To(MatchRegexp(`simulation.BenchmarkSchedules schedules/min\s+1234 schedules/min\s+988 schedules/min\s+-20.0%\s+REGRESSION`))
	g.Expect(out.String()).To(MatchRegexp(`time to converge \(N=1000\)\s+150 s\s+90.0 s\s+-40.0%\s+better`))
	g.Expect(out.String()).To(MatchRegexp(`new figure\s+—\s+1\s+only in B`))
	g.Expect(out.String()).To(HaveSuffix("1 regression(s) beyond 10%\n"))
	g.Expect(out.String()).NotTo(ContainSubstring("different machines"))

	b.Machine.Cores = 4
	out.Reset()
	_, err = WriteComparison(&out, a, b, changes, Thresholds{Count: 0.10, Speed: 0.10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.String()).To(HavePrefix("note: different machines:"))
}

// A time or a rate measured on another machine is shown, not judged; a
// count (allocations, writes) is judged wherever it was measured.
func TestSpeedFiguresOfAnotherMachine(t *testing.T) {
	g := NewWithT(t)
	a := sampleTable()
	a.Figures = append(a.Figures, Figure{Name: "unit.BenchmarkReconcileConverged allocs/op", Value: 1000, Unit: "allocs/op", Better: LowerIsBetter})
	b := sampleTable()
	b.Machine.CPU = "Faster CPU"
	b.Figures = []Figure{
		{Name: "simulation.BenchmarkSchedules schedules/min", Value: 600, Unit: "schedules/min", Better: HigherIsBetter},
		{Name: "unit.BenchmarkReconcileConverged allocs/op", Value: 1500, Unit: "allocs/op", Better: LowerIsBetter},
	}
	changes := Compare(a, b, Thresholds{Count: 0.10, Speed: 0.10})
	g.Expect(changes).To(HaveLen(4))
	g.Expect(changes[2].Regressed).To(BeFalse(), "schedules/min halved, on another CPU")
	g.Expect(changes[2].Unjudged).To(Equal("another machine"))
	g.Expect(changes[3].Regressed).To(BeTrue(), "allocations hold on any machine")

	var out bytes.Buffer
	n, err := WriteComparison(&out, a, b, changes, Thresholds{Count: 0.10, Speed: 0.10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	g.Expect(out.String()).To(MatchRegexp(`schedules/min\s+1234 schedules/min\s+600 schedules/min\s+-51.4%\s+not judged: another machine`))

	b.Machine = a.Machine
	b.Machine.MemoryGB = "48 GiB"
	g.Expect(Compare(a, b, Thresholds{Count: 0.10, Speed: 0.10})[2].Regressed).To(BeTrue(), "same CPU and cores: judged")
}

// Times and rates get their own, wider threshold; counts keep the tight one.
func TestSpeedThreshold(t *testing.T) {
	g := NewWithT(t)
	a := sampleTable()
	a.Figures = append(a.Figures, Figure{Name: "writes per cluster", Value: 10, Better: LowerIsBetter})
	b := sampleTable()
	b.Figures = []Figure{
		{Name: "envtest scale: reconcile p99", Value: 120, Unit: "ms", Better: LowerIsBetter, Note: "N=200"}, // +50%
		{Name: "writes per cluster", Value: 12, Better: LowerIsBetter},                                       // +20%
	}
	th := Thresholds{Count: 0.10, Speed: 1.0}
	changes := Compare(a, b, th)
	g.Expect(changes[0].Regressed).To(BeFalse(), "a time 50%% slower, within 100%%")
	g.Expect(changes[3].Regressed).To(BeTrue(), "a count 20%% up, beyond 10%%")
	var out bytes.Buffer
	n, err := WriteComparison(&out, a, b, changes, th)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	g.Expect(out.String()).To(HaveSuffix("1 regression(s) beyond 10% (times and rates: 100%)\n"))
}

func TestFigureMet(t *testing.T) {
	g := NewWithT(t)
	_, ok := Figure{Value: 1}.Met()
	g.Expect(ok).To(BeFalse())
	met, _ := Figure{Value: 100, Better: LowerIsBetter, Goal: &Goal{Value: 100}}.Met()
	g.Expect(met).To(BeTrue())
	met, _ = Figure{Value: 99, Better: HigherIsBetter, Goal: &Goal{Value: 100}}.Met()
	g.Expect(met).To(BeFalse())
}

func TestFormat(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Format(0, "ms")).To(Equal("0 ms"))
	g.Expect(Format(0.01234, "ms")).To(Equal("0.0123 ms"))
	g.Expect(Format(12.345, "s")).To(Equal("12.3 s"))
	g.Expect(Format(1234.5, "")).To(Equal("1234"))
	g.Expect(Format(math.NaN(), "ms")).To(Equal("NaN ms"))
}

func TestThisMachine(t *testing.T) {
	g := NewWithT(t)
	m := ThisMachine()
	g.Expect(m.Cores).To(BeNumerically(">", 0))
	g.Expect(m.Go).To(HavePrefix("go"))
}
