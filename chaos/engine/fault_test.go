package engine

import (
	"io"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gauntlet-dev/gauntlet/chaos/envtesthost"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// A node-loss is skipped before anything is made wherever it cannot run:
// envtest, an existing cluster, a kind cluster with no worker node.
func TestNodeLossSkippedWhereItCannotRun(t *testing.T) {
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	controlPlane := node("kind-control-plane", map[string]string{controlPlaneLabel: ""})
	cases := []struct {
		name    string
		e       *Engine
		skipped string
	}{
		{"envtest", &Engine{host: &envtesthost.Host{}}, nodeLossNeedsKind},
		{"an existing cluster", &Engine{Cluster: &cluster.Cluster{Existing: true}}, nodeLossNeedsKind},
		{"a kind cluster of its control plane", &Engine{Cluster: &cluster.Cluster{}, Client: fake.NewClientBuilder().WithObjects(controlPlane).Build()},
			"node-loss needs a worker node, and this cluster has only its control plane: run on the multi-node cluster (--multi-node, MULTI_NODE=1)"},
		{"a kind cluster with a worker", &Engine{Cluster: &cluster.Cluster{}, Client: fake.NewClientBuilder().WithObjects(controlPlane, node("kind-worker", nil)).Build()}, ""},
	}
	for _, tc := range cases {
		why, err := tc.e.nodeLossMissing(t.Context())
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), tc.name)
		NewWithT(t).Expect(why).To(Equal(tc.skipped), tc.name)
	}
}

// On envtest a node-loss scenario is skipped, with the reason, before its
// resource is made (the engine has no client to make it with).
func TestNodeLossOnEnvtestSkippedBeforeCreating(t *testing.T) {
	g := NewWithT(t)
	e := &Engine{o: Options{Log: io.Discard}, host: &envtesthost.Host{}}
	s := &scenario.Scenario{Spec: scenario.ScenarioSpec{Fault: scenario.Fault{Action: scenario.ActionNodeLoss, Target: "leader"}}}
	s.Metadata.Name = "node-loss"
	res, end := e.runOnce(t.Context(), s, 1, t.TempDir(), false)
	g.Expect(end).To(BeNil())
	g.Expect(res.Verdict()).To(Equal(report.Skipped))
	g.Expect(res.Skipped).To(Equal(nodeLossNeedsKind))
}
