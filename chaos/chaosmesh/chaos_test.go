package chaosmesh

import (
	"testing"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	. "github.com/onsi/gomega"
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
