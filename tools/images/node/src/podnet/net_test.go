package main

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, podCIDR, ip string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR = podCIDR
		n.Spec.PodCIDRs = []string{podCIDR}
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

func TestParseSubnets(t *testing.T) {
	got, err := parseSubnets("10.244.0.0/16, fd00:10:244::/56")
	if err != nil || !reflect.DeepEqual(got, []string{"10.244.0.0/16"}) {
		t.Fatalf("dual-stack: got %v, %v", got, err)
	}
	if _, err := parseSubnets("fd00:10:244::/56"); err == nil {
		t.Fatal("IPv6 only: want an error")
	}
	if _, err := parseSubnets("10.244.0.0"); err == nil {
		t.Fatal("no prefix length: want an error")
	}
}

func TestNodeNetworksSkipsIncompleteNodes(t *testing.T) {
	nets := nodeNetworks([]corev1.Node{
		node("w2", "10.244.2.0/24", "172.18.0.4"),
		node("cp", "10.244.0.0/24", "172.18.0.2"),
		node("new", "", "172.18.0.5"),       // no pod range yet
		node("noaddr", "10.244.3.0/24", ""), // no address yet
	})
	want := []nodeNet{{"cp", "10.244.0.0/24", "172.18.0.2"}, {"w2", "10.244.2.0/24", "172.18.0.4"}}
	if !reflect.DeepEqual(nets, want) {
		t.Fatalf("got %v, want %v", nets, want)
	}
}

func TestCNIConfigUsesTheNodesRange(t *testing.T) {
	b, err := cniConfigFor("10.244.1.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Name    string `json:"name"`
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
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins: %+v", conf.Plugins)
	}
	if conf.Plugins[0].IPMasq {
		t.Fatal("the bridge must not masquerade: pods on other nodes would not see a pod's address")
	}
	if got := conf.Plugins[0].IPAM.Ranges[0][0].Subnet; got != "10.244.1.0/24" {
		t.Fatalf("range %q", got)
	}
}

func TestParseRoutes(t *testing.T) {
	out := "10.244.1.0/24 via 172.18.0.3 dev eth0 \n10.244.2.0/24 via 172.18.0.4 dev eth0 proto 180 \n\n"
	want := map[string]string{"10.244.1.0/24": "172.18.0.3", "10.244.2.0/24": "172.18.0.4"}
	if got := parseRoutes(out); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

// fakeSystem records commands; routes and iptables rules are kept as state.
type fakeSystem struct {
	files  map[string][]byte
	routes map[string]string
	rules  map[string]bool // "-t nat <chain> <rule...>"
	chains map[string]bool
	cmds   []string
}

func newFake() *fakeSystem {
	return &fakeSystem{files: map[string][]byte{}, routes: map[string]string{}, rules: map[string]bool{}, chains: map[string]bool{}}
}

func (f *fakeSystem) readFile(p string) ([]byte, error) {
	b, ok := f.files[p]
	if !ok {
		return nil, errors.New("no such file")
	}
	return b, nil
}

func (f *fakeSystem) writeFile(p string, b []byte) error {
	f.cmds = append(f.cmds, "write "+p)
	f.files[p] = b
	return nil
}

func (f *fakeSystem) run(name string, args ...string) (string, error) {
	cmd := name + " " + strings.Join(args, " ")
	switch {
	case name == "ip" && args[0] == "-4":
		var b strings.Builder
		for _, dst := range sortedKeys(f.routes) {
			b.WriteString(dst + " via " + f.routes[dst] + " dev eth0 \n")
		}
		return b.String(), nil
	case name == "ip" && args[1] == "replace":
		f.cmds = append(f.cmds, cmd)
		f.routes[args[2]] = args[4]
	case name == "ip" && args[1] == "del":
		f.cmds = append(f.cmds, cmd)
		delete(f.routes, args[2])
	case name == "iptables-nft-save":
		return "*nat\n-A KUBE-SERVICES -j KUBE-NODEPORTS\n", nil
	case name == "iptables-legacy-save":
		return "", nil
	case strings.HasPrefix(name, "iptables-"):
		op, rest := args[3], strings.Join(args[4:], " ")
		switch op {
		case "-C":
			if !f.rules[rest] {
				return "", errors.New("no such rule")
			}
		case "-N":
			f.cmds = append(f.cmds, cmd)
			f.chains[args[4]] = true
		case "-F":
			f.cmds = append(f.cmds, cmd)
			for r := range f.rules {
				if strings.HasPrefix(r, args[4]+" ") {
					delete(f.rules, r)
				}
			}
		case "-A":
			f.cmds = append(f.cmds, cmd)
			f.rules[rest] = true
		}
	}
	return "", nil
}

func TestReconcileRoutesOtherNodesAndIsIdempotent(t *testing.T) {
	sys := newFake()
	r := &reconciler{self: "w1", podSubnets: []string{"10.244.0.0/16"}, cniConfig: "/etc/cni/net.d/10-podnet.conflist", sys: sys}
	nodes := []corev1.Node{
		node("cp", "10.244.0.0/24", "172.18.0.2"),
		node("w1", "10.244.1.0/24", "172.18.0.3"),
		node("w2", "10.244.2.0/24", "172.18.0.4"),
	}
	if err := r.reconcile(nodes); err != nil {
		t.Fatal(err)
	}
	wantRoutes := map[string]string{"10.244.0.0/24": "172.18.0.2", "10.244.2.0/24": "172.18.0.4"}
	if !reflect.DeepEqual(sys.routes, wantRoutes) {
		t.Fatalf("routes %v, want %v", sys.routes, wantRoutes)
	}
	if !strings.Contains(string(sys.files[r.cniConfig]), `"subnet": "10.244.1.0/24"`) {
		t.Fatalf("CNI config: %s", sys.files[r.cniConfig])
	}
	if r.iptables != "iptables-nft" {
		t.Fatalf("backend %q: the nft one holds the rules", r.iptables)
	}
	for _, want := range []string{
		"PODNET-MASQ -d 10.244.0.0/16 -j RETURN",
		"PODNET-MASQ -m addrtype --dst-type LOCAL -j RETURN",
		"PODNET-MASQ -s 10.244.0.0/16 -j MASQUERADE",
		strings.Join(jumpRule, " "),
	} {
		if !sys.rules[want] {
			t.Errorf("missing iptables rule %q (have %v)", want, sys.rules)
		}
	}

	// Nothing changed: nothing is written.
	sys.cmds = nil
	if err := r.reconcile(nodes); err != nil {
		t.Fatal(err)
	}
	if len(sys.cmds) != 0 {
		t.Fatalf("second reconcile changed things: %v", sys.cmds)
	}

	// w2 leaves, w3 joins with a new address for an old range.
	sys.cmds = nil
	nodes = []corev1.Node{nodes[0], nodes[1], node("w3", "10.244.3.0/24", "172.18.0.5")}
	nodes[0].Status.Addresses[1].Address = "172.18.0.9"
	if err := r.reconcile(nodes); err != nil {
		t.Fatal(err)
	}
	wantRoutes = map[string]string{"10.244.0.0/24": "172.18.0.9", "10.244.3.0/24": "172.18.0.5"}
	if !reflect.DeepEqual(sys.routes, wantRoutes) {
		t.Fatalf("routes %v, want %v (commands %v)", sys.routes, wantRoutes, sys.cmds)
	}
}

func TestReconcileWaitsForTheNodesRange(t *testing.T) {
	sys := newFake()
	r := &reconciler{self: "w1", podSubnets: []string{"10.244.0.0/16"}, cniConfig: "/c", sys: sys}
	err := r.reconcile([]corev1.Node{node("cp", "10.244.0.0/24", "172.18.0.2"), node("w1", "", "172.18.0.3")})
	if err == nil || len(sys.cmds) != 0 {
		t.Fatalf("got %v, commands %v: want an error and no change", err, sys.cmds)
	}
}

func TestExecSystemWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/10-podnet.conflist"
	var sys execSystem
	for _, content := range []string{"one\n", "two\n"} {
		if err := sys.writeFile(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := sys.readFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("got %q, %v; want %q", got, err, content)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	if info, _ := entries[0].Info(); info.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", info.Mode())
	}
}
