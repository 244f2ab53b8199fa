package simulation

import (
	"testing"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// BenchmarkSchedules measures perturbed schedules per minute on the fake
// client, exploring seeds on every core as make test-sim does: each schedule
// runs with its faults and again without them (the differential oracle).
func BenchmarkSchedules(b *testing.B) {
	target := reference.SimTarget(reference.SimOptions{})
	b.ReportAllocs()
	b.ResetTimer()
	failure, ran, err := sim.RunSeeds(b.Context(), target, 1, b.N, sim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if failure != nil {
		b.Fatalf("seed %d: %v", failure.Schedule.Seed, failure.Violation)
	}
	b.ReportMetric(float64(ran)/b.Elapsed().Minutes(), "schedules/min")
}
