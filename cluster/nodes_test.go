package cluster

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
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
