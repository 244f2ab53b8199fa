//go:build e2e && bench

package e2e_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
)

var rounds = flag.Int("rounds", 5, "bring-up rounds of TestBenchBringUp")

// TestBenchBringUp measures, round after round on the e2e cluster, how long
// a 3-member cluster takes to settle, then a 3→5 scale-up, then the
// recovery from a deleted member pod (make bench-e2e ROUNDS=5), and prints
// the median and maximum of each with its goal. It measures; it does not
// fail on a goal (figures are judged in the benchmark table, not in tests).
func TestBenchBringUp(t *testing.T) {
	var all []e2e.BringUp
	for i := range *rounds {
		t.Run(fmt.Sprintf("round-%d", i+1), func(t *testing.T) {
			b := e2e.BringUpRound(t.Context(), t, input(t, "bench-"))
			t.Logf("create %.1fs (%s), create with on-demand volumes %.1fs (%s), scale-up %.1fs, pod-delete %.1fs (%s)",
				b.Create.Seconds(), b.CreateSteps, b.CreateProvisioned.Seconds(), b.CreateProvisionedSteps, b.ScaleUp.Seconds(), b.PodDelete.Seconds(), b.PodDeleteSteps)
			all = append(all, b)
		})
	}
	if len(all) == 0 {
		t.Fatal("no round completed")
	}
	table := e2e.FormatBringUps(e2e.SummariseBringUps(all), len(all))
	fmt.Print("\n" + table)
	out := filepath.Join(framework.ArtifactsDir(), "bench-e2e.md")
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("table written to %s", out)
}
