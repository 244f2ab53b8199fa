package unit

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// TestSteadyStateWritesNothing: once converged, further passes (as a resync
// would run) make no write call at all and change no object.
func TestSteadyStateWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := converged(t, c)

	before, err := w.Driver.Snapshot(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	mark := w.Writes.Len()
	for range 5 {
		_, err := w.Reconciler.Reconcile(ctx, reference.Request(c))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(w.Writes.Since(mark)).To(BeEmpty(), "writes on a converged cluster:\n%s", framework.FormatWrites(w.Writes.Since(mark)))
	after, err := w.Driver.Snapshot(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(before), "objects changed: %s", framework.Keys(after))
}
