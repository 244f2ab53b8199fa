package unit

import (
	"testing"

	. "github.com/onsi/gomega"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// converged returns a world holding c, reconciled until stable.
func converged(t *testing.T, c *dbv1.DatabaseCluster) *reference.World {
	t.Helper()
	w := reference.NewWorld(t, c)
	settle(t, w, c)
	return w
}

// settle reconciles until stable and re-reads c.
func settle(t *testing.T, w *reference.World, c *dbv1.DatabaseCluster) {
	t.Helper()
	g := NewWithT(t)
	_, err := w.Driver.ReconcileUntilStable(t.Context(), reference.Request(c))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Get(t.Context(), c)).To(Succeed())
}

// update changes c's spec through the fake API, bumping its generation as a
// server would.
func update(t *testing.T, w *reference.World, c *dbv1.DatabaseCluster, mutate func(*dbv1.DatabaseCluster)) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(w.Get(t.Context(), c)).To(Succeed())
	mutate(c)
	c.Generation++
	g.Expect(w.Client.Update(t.Context(), c)).To(Succeed())
}

// drainEvents returns the events recorded so far.
func drainEvents(w *reference.World) []string {
	var out []string
	for {
		select {
		case e := <-w.Events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
