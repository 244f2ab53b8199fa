package cluster

import (
	"encoding/json"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestBridgeConfigServesTheNodesRange(t *testing.T) {
	g := NewWithT(t)
	b, err := bridgeConfig("10.244.2.0/24")
	g.Expect(err).NotTo(HaveOccurred())
	var conf struct {
		Plugins []struct {
			Type   string `json:"type"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	g.Expect(json.Unmarshal(b, &conf)).To(Succeed())
	g.Expect(conf.Plugins).To(HaveLen(2))
	g.Expect(conf.Plugins[0].Type).To(Equal("bridge"))
	g.Expect(conf.Plugins[0].IPMasq).To(BeFalse(), "pod to pod traffic keeps its addresses (partitions match them); the node masquerades the rest")
	g.Expect(conf.Plugins[0].IPAM.Ranges[0][0].Subnet).To(Equal("10.244.2.0/24"))
	g.Expect(conf.Plugins[1].Type).To(Equal("portmap"))
}

func TestNetworkScriptRoutesTheOtherNodes(t *testing.T) {
	g := NewWithT(t)
	all := []nodeNetwork{
		{name: "cp", ip: "172.18.0.2", podCIDR: "10.244.0.0/24"},
		{name: "w1", ip: "172.18.0.3", podCIDR: "10.244.1.0/24"},
		{name: "w2", ip: "172.18.0.4", podCIDR: "10.244.2.0/24"},
	}
	script := networkScript(all[1], all)
	g.Expect(script).To(ContainSubstring("ip route replace 10.244.0.0/24 via 172.18.0.2\n"))
	g.Expect(script).To(ContainSubstring("ip route replace 10.244.2.0/24 via 172.18.0.4\n"))
	g.Expect(script).NotTo(ContainSubstring("10.244.1.0/24 via"), "no route to its own range")
	g.Expect(script).To(ContainSubstring("iptables -t nat -C POSTROUTING -s 10.244.1.0/24 ! -d 10.244.0.0/16 -j MASQUERADE 2>/dev/null || iptables -t nat -A POSTROUTING -s 10.244.1.0/24 ! -d 10.244.0.0/16 -j MASQUERADE"),
		"idempotent: checked before it is added")
}

func daemonSet(ns, name string, labels map[string]string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

func TestRoutesPodsKnowsTheRoutingNetworks(t *testing.T) {
	g := NewWithT(t)
	g.Expect(routesPods(daemonSet("kube-system", "kindnet", nil))).To(BeTrue(), "upstream kind images' kindnet")
	g.Expect(routesPods(daemonSet("kube-system", "podnet", map[string]string{podNetworkLabel: "routed"}))).To(BeTrue(), "the 1.36+ offline images' podnet")
	g.Expect(routesPods(daemonSet("kube-system", "kube-proxy", nil))).To(BeFalse())
	g.Expect(routesPods(daemonSet("default", "kindnet", nil))).To(BeFalse(), "only kube-system's")
	g.Expect(routesPods(daemonSet("kube-system", "other", map[string]string{podNetworkLabel: "bridge"}))).To(BeFalse())
}

func TestRoutingDaemonSet(t *testing.T) {
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	ctx := t.Context()

	// The v1.35 offline image: kube-proxy only, the harness routes.
	cl := fake.NewClientBuilder().WithScheme(s).WithObjects(daemonSet("kube-system", "kube-proxy", nil)).Build()
	name, err := routingDaemonSet(ctx, cl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(name).To(BeEmpty())

	// The 1.36+ offline images: podnet routes.
	cl = fake.NewClientBuilder().WithScheme(s).WithObjects(
		daemonSet("kube-system", "kube-proxy", nil),
		daemonSet("kube-system", "podnet", map[string]string{"app": "podnet", podNetworkLabel: "routed"}),
	).Build()
	name, err = routingDaemonSet(ctx, cl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(name).To(Equal("podnet"))
}

// Every kind config a node image can need is built in, so a run needs no
// checkout to make its cluster; the file written for kind holds it.
func TestBuiltInKindConfigs(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, ni := range NodeImages {
		for _, image := range []string{ni.Upstream, ni.Offline} {
			for _, multi := range []bool{false, true} {
				name := KindConfigFor(image, multi)
				b, err := KindConfig(name)
				g.Expect(err).NotTo(HaveOccurred(), "%s (multi-node %v)", image, multi)
				g.Expect(string(b)).To(ContainSubstring("kind: Cluster"))
				path, err := KindConfigFile(name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(os.ReadFile(path)).To(Equal(b))
			}
		}
	}
	_, err := KindConfig("no-such")
	g.Expect(err).To(MatchError(`no built-in kind config "no-such"`))
}
