package scenario

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestAloneSaysWhatCannotShareACluster(t *testing.T) {
	roles := map[string]Role{
		"members":  {Pods: map[string]string{"app": "etcd"}},
		"leader":   {From: "members", Pick: "one"},
		"operator": {Operator: true},
		"one-op":   {From: "operator", Pick: "one"},
		"api":      {APIServer: true},
	}
	spec := func(f Fault, mutate ...func(*ScenarioSpec)) *Scenario {
		s := &Scenario{Spec: ScenarioSpec{Roles: roles, Fault: f}}
		for _, m := range mutate {
			m(&s.Spec)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		s    *Scenario
		want string
	}{
		{"a member's pod killed", spec(Fault{Action: ActionPodKill, Target: "leader"}), ""},
		{"members partitioned", spec(Fault{Action: ActionPartition, Target: "leader", Peer: "members"}), ""},
		{"no fault", spec(Fault{Action: ActionNone}), ""},
		{"a member's pods deleted", spec(Fault{Action: ActionNone}, func(s *ScenarioSpec) { s.Before = []Action{{DeletePods: &DeletePods{Role: "members"}}} }), ""},
		{"the operator killed", spec(Fault{Action: ActionPodKill, Target: "operator"}), "it acts on role operator, the operator's pods"},
		{"a role narrowed from the operator's", spec(Fault{Action: ActionPodKill, Target: "one-op"}), "it acts on role one-op, the operator's pods"},
		{"the operator cut from the API server", spec(Fault{Action: ActionPartition, Target: "operator", Peer: "api"}), "it acts on role operator, the operator's pods"},
		{"a member cut from the API server", spec(Fault{Action: ActionPartition, Target: "members", Peer: "api"}), "it cuts role api, the operator's path to the API server"},
		{"the operator's pods deleted during the run", spec(Fault{Action: ActionNone}, func(s *ScenarioSpec) { s.During = []Action{{DeletePods: &DeletePods{Role: "operator"}}} }), "it acts on role operator, the operator's pods"},
		{"a node lost", spec(Fault{Action: ActionNodeLoss, Target: "leader"}), "its fault stops a node, with every pod on it"},
		{"a view fault", spec(Fault{Action: ActionStaleView}), "its view fault acts on the operator's requests, whatever the resource"},
		{"the differential oracle", spec(Fault{Action: ActionNone}, func(s *ScenarioSpec) { s.Assertions.SameAsFresh = true }), "the differential oracle restarts the operator"},
		{"a role that does not exist", spec(Fault{Action: ActionPodKill, Target: "nobody"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.s.Alone()).To(Equal(tc.want))
		})
	}
}
