package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	// routeProto marks the routes podnet adds (`ip route ... proto 180`), so that it
	// can list and remove its own and no other.
	routeProto = "180"
	// masqChain is the nat chain holding podnet's masquerade rules.
	masqChain = "PODNET-MASQ"
)

// system is what a reconcile touches on the node: commands (ip, iptables) and files.
type system interface {
	run(name string, args ...string) (string, error)
	readFile(path string) ([]byte, error)
	writeFile(path string, data []byte) error
}

type reconciler struct {
	self       string   // this node's name
	podSubnets []string // the cluster's IPv4 pod networks
	cniConfig  string   // the conflist to write
	sys        system

	iptables string // the iptables binary the node uses, found on first need
}

// nodeNet is what podnet needs of a node: its name, IPv4 pod range and address.
type nodeNet struct {
	name, podCIDR, ip string
}

// parseSubnets returns the IPv4 networks of kind's pod subnet setting (a comma-separated
// list, dual-stack clusters name an IPv6 one too, which podnet leaves alone).
func parseSubnets(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ip, n, err := net.ParseCIDR(f)
		if err != nil {
			return nil, err
		}
		if ip.To4() != nil {
			out = append(out, n.String())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no IPv4 network in %q", s)
	}
	return out, nil
}

func isIPv4CIDR(s string) bool {
	ip, _, err := net.ParseCIDR(s)
	return err == nil && ip.To4() != nil
}

// nodeNetworks returns each node's IPv4 pod range and InternalIP, sorted by name; nodes
// without both (a pod range is given by the controller manager shortly after the node
// registers) are left out.
func nodeNetworks(nodes []corev1.Node) []nodeNet {
	var out []nodeNet
	for _, n := range nodes {
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		var nn nodeNet
		nn.name = n.Name
		for _, c := range cidrs {
			if isIPv4CIDR(c) {
				nn.podCIDR = c
				break
			}
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address).To4() != nil {
				nn.ip = a.Address
				break
			}
		}
		if nn.podCIDR != "" && nn.ip != "" {
			out = append(out, nn)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// cniConfigFor is the node's conflist: a bridge with host-local addresses from the
// node's pod range, and portmap for hostPort. No ipMasq: podnet masquerades only what
// leaves the pod network (the bridge plugin's would also hide a pod's address from pods
// on other nodes).
func cniConfigFor(podCIDR string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "podnet",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// wantRoutes maps every other node's pod range to that node's address.
func wantRoutes(self string, nets []nodeNet) map[string]string {
	want := map[string]string{}
	for _, n := range nets {
		if n.name != self {
			want[n.podCIDR] = n.ip
		}
	}
	return want
}

// parseRoutes reads `ip -4 -o route show proto 180`: destination -> gateway.
func parseRoutes(out string) map[string]string {
	have := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		gw := ""
		for i := 1; i+1 < len(f); i++ {
			if f[i] == "via" {
				gw = f[i+1]
				break
			}
		}
		have[f[0]] = gw
	}
	return have
}

// reconcile brings the node's CNI config, routes and masquerade rules in line with the
// nodes' pod ranges.
func (r *reconciler) reconcile(nodes []corev1.Node) error {
	nets := nodeNetworks(nodes)
	var self *nodeNet
	for i := range nets {
		if nets[i].name == r.self {
			self = &nets[i]
		}
	}
	if self == nil {
		return fmt.Errorf("node %s has no IPv4 pod range and address yet", r.self)
	}
	var errs []error
	if err := r.writeCNIConfig(self.podCIDR); err != nil {
		errs = append(errs, err)
	}
	if err := r.syncRoutes(wantRoutes(r.self, nets)); err != nil {
		errs = append(errs, err)
	}
	if err := r.syncMasquerade(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (r *reconciler) writeCNIConfig(podCIDR string) error {
	want, err := cniConfigFor(podCIDR)
	if err != nil {
		return err
	}
	if have, err := r.sys.readFile(r.cniConfig); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := r.sys.writeFile(r.cniConfig, want); err != nil {
		return fmt.Errorf("writing %s: %w", r.cniConfig, err)
	}
	log.Printf("wrote %s for pod range %s", r.cniConfig, podCIDR)
	return nil
}

func (r *reconciler) syncRoutes(want map[string]string) error {
	out, err := r.sys.run("ip", "-4", "-o", "route", "show", "proto", routeProto)
	if err != nil {
		return fmt.Errorf("listing routes: %w: %s", err, out)
	}
	have := parseRoutes(out)
	var errs []error
	for _, dst := range sortedKeys(want) {
		gw := want[dst]
		if have[dst] == gw {
			continue
		}
		if out, err := r.sys.run("ip", "route", "replace", dst, "via", gw, "proto", routeProto); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s: %w: %s", dst, gw, err, out))
			continue
		}
		log.Printf("route %s via %s", dst, gw)
	}
	for _, dst := range sortedKeys(have) {
		if _, ok := want[dst]; ok {
			continue
		}
		if out, err := r.sys.run("ip", "route", "del", dst, "proto", routeProto); err != nil {
			errs = append(errs, fmt.Errorf("removing route %s: %w: %s", dst, err, out))
			continue
		}
		log.Printf("removed route %s (its node is gone)", dst)
	}
	return errors.Join(errs...)
}

// masqRules are the rules of masqChain, in order: traffic to the pod network or to the
// node itself stays as it is, anything else a pod sends leaves with the node's address.
func masqRules(podSubnets []string) [][]string {
	var rules [][]string
	for _, s := range podSubnets {
		rules = append(rules, []string{"-d", s, "-j", "RETURN"})
	}
	rules = append(rules, []string{"-m", "addrtype", "--dst-type", "LOCAL", "-j", "RETURN"})
	for _, s := range podSubnets {
		rules = append(rules, []string{"-s", s, "-j", "MASQUERADE"})
	}
	return rules
}

var jumpRule = []string{"POSTROUTING", "-m", "comment", "--comment", "podnet: masquerade what pods send out of the pod network", "-j", masqChain}

// syncMasquerade makes sure masqChain holds masqRules and POSTROUTING jumps to it;
// when any rule is missing it rebuilds the chain.
func (r *reconciler) syncMasquerade() error {
	ipt, err := r.iptablesBinary()
	if err != nil {
		return err
	}
	complete := true
	for _, rule := range masqRules(r.podSubnets) {
		if _, err := r.sys.run(ipt, append([]string{"-w", "-t", "nat", "-C", masqChain}, rule...)...); err != nil {
			complete = false
			break
		}
	}
	if !complete {
		// -N fails when the chain exists, -F empties it: either way it is then empty.
		_, _ = r.sys.run(ipt, "-w", "-t", "nat", "-N", masqChain)
		if out, err := r.sys.run(ipt, "-w", "-t", "nat", "-F", masqChain); err != nil {
			return fmt.Errorf("%s -F %s: %w: %s", ipt, masqChain, err, out)
		}
		for _, rule := range masqRules(r.podSubnets) {
			if out, err := r.sys.run(ipt, append([]string{"-w", "-t", "nat", "-A", masqChain}, rule...)...); err != nil {
				return fmt.Errorf("%s -A %s %s: %w: %s", ipt, masqChain, strings.Join(rule, " "), err, out)
			}
		}
		log.Printf("masquerade rules written (%s, chain %s)", ipt, masqChain)
	}
	if _, err := r.sys.run(ipt, append([]string{"-w", "-t", "nat", "-C"}, jumpRule...)...); err != nil {
		if out, err := r.sys.run(ipt, append([]string{"-w", "-t", "nat", "-A"}, jumpRule...)...); err != nil {
			return fmt.Errorf("%s -A POSTROUTING: %w: %s", ipt, err, out)
		}
	}
	return nil
}

// iptablesBinary picks the iptables backend the node uses (kind's entrypoint and
// kube-proxy choose one): the one holding more rules; nft when neither holds any.
func (r *reconciler) iptablesBinary() (string, error) {
	if r.iptables != "" {
		return r.iptables, nil
	}
	count := func(save string) int {
		out, err := r.sys.run(save)
		if err != nil {
			return -1
		}
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "-A ") {
				n++
			}
		}
		return n
	}
	nft, legacy := count("iptables-nft-save"), count("iptables-legacy-save")
	switch {
	case nft < 0 && legacy < 0:
		return "", errors.New("neither iptables-nft-save nor iptables-legacy-save works")
	case legacy > nft:
		r.iptables = "iptables-legacy"
	default:
		r.iptables = "iptables-nft"
	}
	log.Printf("iptables backend: %s (rules: nft %d, legacy %d)", r.iptables, nft, legacy)
	return r.iptables, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// execSystem is the node itself.
type execSystem struct{}

func (execSystem) run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

func (execSystem) readFile(path string) ([]byte, error) { return os.ReadFile(path) }

// writeFile replaces path atomically: containerd never reads half a config.
func (execSystem) writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".podnet-*")
	if err != nil {
		return err
	}
	// After the rename there is nothing left to remove; before it, the
	// write's own error is the one to report.
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
