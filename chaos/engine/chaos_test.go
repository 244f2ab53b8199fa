package engine

import (
	"testing"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestExperimentsPassChaosMeshValidation(t *testing.T) {
	db := Pods{Namespace: "db", Names: []string{"db-0"}}
	rest := Pods{Namespace: "db", Names: []string{"db-1", "db-2"}}
	cases := []struct {
		exp      *Experiment
		kind     string
		needs    []Feature
		targets  int
		netRules bool
	}{
		{PodKill("a", db), "PodChaos/pod-kill", nil, 1, false},
		{ContainerKill("a", db, "etcd"), "PodChaos/container-kill", nil, 1, false},
		{PodFailure("a", db, time.Minute), "PodChaos/pod-failure", nil, 1, false},
		{Partition("a", db, rest), "NetworkChaos/partition", []Feature{IPSet}, 2, true},
		{PartitionFrom("a", db, "10.96.0.1", "172.18.0.2"), "NetworkChaos/partition", []Feature{IPSet}, 1, true},
		{Bandwidth("a", db, "1mbps"), "NetworkChaos/bandwidth", []Feature{TBF}, 1, false},
		{Delay("a", db, 100*time.Millisecond), "NetworkChaos/delay", []Feature{Netem}, 1, false},
		{Loss("a", db, 30), "NetworkChaos/loss", []Feature{Netem}, 1, false},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(c.exp.Kind()).To(Equal(c.kind))
			g.Expect(c.exp.Needs).To(Equal(c.needs))
			g.Expect(c.exp.Targets).To(HaveLen(c.targets))
			g.Expect(c.exp.NetworkRules).To(Equal(c.netRules))
			g.Expect(c.exp.Object.GetNamespace()).To(Equal("db"))
			// Chaos Mesh's own defaulting and validation, as its webhook
			// runs them on create.
			var err error
			switch o := c.exp.Object.(type) {
			case *chaosv1alpha1.PodChaos:
				g.Expect(o.Default(t.Context(), o)).To(Succeed())
				_, err = o.ValidateCreate(t.Context(), o)
				g.Expect(o.Spec.Selector.Pods).To(HaveKeyWithValue("db", []string{"db-0"}))
			case *chaosv1alpha1.NetworkChaos:
				g.Expect(o.Default(t.Context(), o)).To(Succeed())
				_, err = o.ValidateCreate(t.Context(), o)
				g.Expect(o.Spec.Selector.Pods).To(HaveKeyWithValue("db", []string{"db-0"}))
			}
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestChaosMeshRejectsWhatItShould(t *testing.T) {
	// The validation above can fail: a bandwidth without a rate is refused.
	g := NewWithT(t)
	e := Bandwidth("a", Pods{Namespace: "db", Names: []string{"db-0"}}, "")
	o := e.Object.(*chaosv1alpha1.NetworkChaos)
	_, err := o.ValidateCreate(t.Context(), o)
	g.Expect(err).To(HaveOccurred())
}

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
