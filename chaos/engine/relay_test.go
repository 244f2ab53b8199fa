package engine

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// The relay is the way to the proxy on an existing cluster whose pods'
// route to this machine was not given, or when asked for; never for a set
// without view faults.
func TestViaRelay(t *testing.T) {
	g := NewWithT(t)
	view := &scenario.Set{Scenarios: []*scenario.Scenario{{Spec: scenario.ScenarioSpec{Fault: scenario.Fault{Action: scenario.ViewActions[0]}}}}}
	infra := &scenario.Set{Scenarios: []*scenario.Scenario{{Spec: scenario.ScenarioSpec{Fault: scenario.Fault{Action: "pod-kill"}}}}}
	via := func(set *scenario.Set, c cluster.Options, r RelayOptions) bool {
		return (&Engine{o: Options{Set: set, Cluster: c, Relay: r}}).viaRelay()
	}
	g.Expect(via(view, cluster.Options{}, RelayOptions{})).To(BeFalse(), "kind made here: its gateway")
	g.Expect(via(view, cluster.Options{}, RelayOptions{Always: true})).To(BeTrue())
	g.Expect(via(view, cluster.Options{Existing: true}, RelayOptions{})).To(BeTrue())
	g.Expect(via(view, cluster.Options{Existing: true, HostAddress: "10.0.0.1"}, RelayOptions{})).To(BeFalse())
	g.Expect(via(infra, cluster.Options{Existing: true}, RelayOptions{Always: true})).To(BeFalse())
}
