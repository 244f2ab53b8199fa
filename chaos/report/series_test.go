package report

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/workload"
)

func TestSeriesFromLedger(t *testing.T) {
	g := NewWithT(t)
	start := time.Unix(2000, 0)
	l := &workload.Ledger{Start: start, Ops: []workload.Op{
		{Kind: workload.KindPut, Outcome: workload.OK, Invoke: 0, Return: int64(4 * time.Millisecond)},
		{Kind: workload.KindPut, Outcome: workload.Ambiguous, Invoke: 0, Return: int64(150 * time.Millisecond)},
	}}
	s := &Series{}
	s.SetWorkload(l)
	g.Expect(s.Start).To(Equal(start))
	g.Expect(s.BucketMillis).To(Equal(int64(100)))
	g.Expect(s.Writes).To(Equal([]int{1, 0}))
	g.Expect(s.Errors).To(Equal([]int{0, 1}))
	g.Expect(s.LatencyMaxMillis).To(Equal([]float64{4, 150}))
}
