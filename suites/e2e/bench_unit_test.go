package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestSummariseBringUps(t *testing.T) {
	g := NewWithT(t)
	s := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	rounds := []BringUp{
		{Create: s(9), CreateProvisioned: s(12), ScaleUp: s(12), PodDelete: s(3)},
		{Create: s(6), CreateProvisioned: s(11), ScaleUp: s(10), PodDelete: s(4)},
		{Create: s(7), CreateProvisioned: s(10), ScaleUp: s(30), PodDelete: s(2)},
		{Create: s(8), CreateProvisioned: s(13), ScaleUp: s(11), PodDelete: s(5)},
	}
	figs := SummariseBringUps(rounds)
	g.Expect(figs).To(HaveLen(4))
	g.Expect(figs[0].Median).To(Equal(s(7.5)), "the mean of the middle two of an even count")
	g.Expect(figs[0].Max).To(Equal(s(9)))
	g.Expect(figs[1].Median).To(Equal(s(11.5)))
	g.Expect(figs[2].Median).To(Equal(s(11.5)))
	g.Expect(figs[3].Median).To(Equal(s(3.5)))

	table := FormatBringUps(figs, len(rounds))
	g.Expect(table).To(ContainSubstring("| 3 members Available, 3 healthy voters (volumes made ahead) | 7.5 s | 9.0 s | ≤ 7.0 s (not met) | 4 |"))
	g.Expect(table).To(ContainSubstring("| 3 members Available, 3 healthy voters (volumes provisioned on demand) | 11.5 s | 13.0 s | — | 4 |"))
	g.Expect(table).To(ContainSubstring("| scale-up 3→5 settled (volumes made ahead) | 11.5 s | 30.0 s | — | 4 |"))
	g.Expect(table).To(ContainSubstring("| member pod deleted → settled again | 3.5 s | 5.0 s | ≤ 3.5 s (met) | 4 |"))
	g.Expect(FormatBringUps(SummariseBringUps([]BringUp{{Create: s(1)}}), 1)).To(ContainSubstring("| 1.0 s | 1.0 s | ≤ 7.0 s (met) | 1 |"))
}
