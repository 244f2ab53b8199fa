package unit

import (
	"testing"

	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// BenchmarkReconcileConverged measures one pass on a converged 3-member
// cluster on the fake client; writes/op must stay 0.
func BenchmarkReconcileConverged(b *testing.B) {
	c := reference.NewCluster("default", "db").Build()
	w := reference.NewWorld(b, c)
	ctx := b.Context()
	if _, err := w.Driver.ReconcileUntilStable(ctx, reference.Request(c)); err != nil {
		b.Fatal(err)
	}
	req := reference.Request(c)
	mark := w.Writes.Len()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Reconciler.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	writes := len(w.Writes.Since(mark))
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
	if writes != 0 {
		b.Fatalf("a converged pass wrote: %d writes over %d passes", writes, b.N)
	}
}
