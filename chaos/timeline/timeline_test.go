package timeline

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func sample(tl *Timeline, at time.Time, conds map[string]string) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	var list []any
	for t, s := range conds {
		list = append(list, map[string]any{"type": t, "status": s, "reason": "R"})
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
	tl.add(at, u)
}

func TestTimeline(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tl := &Timeline{}
	sample(tl, at(0), map[string]string{"Available": "True", "Degraded": "False"})
	sample(tl, at(1), map[string]string{"Available": "True", "Degraded": "False"}) // no change: not recorded
	sample(tl, at(3), map[string]string{"Available": "True", "Degraded": "True"})
	sample(tl, at(8), map[string]string{"Available": "False", "Degraded": "True"})
	sample(tl, at(12), map[string]string{"Available": "True", "Degraded": "False"})
	g.Expect(tl.Samples()).To(HaveLen(4))

	d, ok := tl.First("Degraded", "True", at(2))
	g.Expect(ok).To(BeTrue())
	g.Expect(d).To(Equal(at(3)))
	d, ok = tl.First("Degraded", "True", at(5)) // already True at 5
	g.Expect(ok).To(BeTrue())
	g.Expect(d).To(Equal(at(5)))
	_, ok = tl.First("Degraded", "True", at(13))
	g.Expect(ok).To(BeFalse())
	g.Expect(tl.Ever("Available", "False", at(2), at(7))).To(BeFalse())
	g.Expect(tl.Ever("Available", "False", at(2), at(8))).To(BeTrue())
	g.Expect(tl.Ever("Available", "False", at(9), at(10))).To(BeTrue(), "in force since 8")
	g.Expect(tl.String(t0)).To(ContainSubstring("+8.0s"))
}
