package htmlreport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport/browser"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// TestBrowserRecordedRun renders the report of a real run (its report.json
// is checked in under chaos/report/testdata) and opens it in headless Chromium:
// a timeline per scenario with a workload, the summary and check tables,
// the twin comparison and the proxy's actions of a view-fault run, no
// console error, no request outside the file. The screenshot lands in
// $ARTIFACTS/report-screenshot.png for a person to look at.
func TestBrowserRecordedRun(t *testing.T) {
	exe, err := browser.FindChromium()
	if err != nil {
		if os.Getenv("GAUNTLET_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GAUNTLET_REQUIRE_BROWSER=1 but %v", err)
		}
		t.Skip("no Chromium: run ci/chromium.sh (Debian's chromium), as make test-report does")
	}
	files, err := filepath.Glob("../report/testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded run in chaos/report/testdata (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			rep, err := report.ReadReport(f)
			g.Expect(err).NotTo(HaveOccurred())
			ran, plots, twins, injected := 0, 0, 0, 0
			for _, r := range rep.Results {
				if r.Verdict() != report.Skipped {
					ran++
				}
				if (r.Series != nil && len(r.Series.Writes) > 0) || len(r.Injections) > 0 {
					plots++ // a timeline is drawn around the workload's series, or the proxy's actions
				}
				if r.Twin != nil && len(r.Twin.Differences) > 0 {
					twins++
				}
				if len(r.Injections) > 0 {
					injected++
				}
			}
			g.Expect(ran).To(BeNumerically(">", 0))
			dir := t.TempDir()
			page, err := Write(rep, dir)
			g.Expect(err).NotTo(HaveOccurred())

			artifacts := os.Getenv("ARTIFACTS") // make sets it; alone, the module's test writes nothing outside
			if artifacts == "" {
				artifacts = t.TempDir()
			}
			// The first recorded run's screenshot is the README's; the
			// others get their own.
			shot := filepath.Join(artifacts, "report-screenshot.png")
			if name := strings.TrimSuffix(filepath.Base(f), ".json"); !strings.HasPrefix(name, "kind-seed-2026") {
				shot = filepath.Join(artifacts, "report-screenshot-"+name+".png")
			}
			res, err := browser.Check(t.Context(), page, browser.Options{Exec: exe, Width: 1400, Height: 1600, Screenshot: shot,
				Count: []string{"section.scenario .plot svg", "#summary tbody tr", "table.checks", "#tally span", "table.twin", "details.injections"}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.ConsoleErrors).To(BeEmpty())
			g.Expect(res.Requests).To(BeEmpty(), "the report is self-contained")
			g.Expect(res.Title).To(ContainSubstring("Gauntlet chaos run"))
			g.Expect(res.Counts).To(Equal(map[string]int{
				"section.scenario .plot svg": plots,
				"#summary tbody tr":          len(rep.Results),
				"table.checks":               ran,
				"#tally span":                3,
				"table.twin":                 twins,
				"details.injections":         injected,
			}))
			g.Expect(shot).To(BeAnExistingFile())
			t.Logf("screenshot: %s", shot)
		})
	}
}
