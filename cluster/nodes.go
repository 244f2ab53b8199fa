package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// The offline node image carries a bridge CNI whose one range serves a
// single node (kindnetd is not buildable offline). On a cluster of several
// nodes the harness does kindnetd's job itself: each node's bridge takes
// the pod range the controller manager gave the node, every node routes the
// other nodes' ranges to them, and pod traffic leaves the cluster's range
// masqueraded, not traffic between pods (Chaos Mesh's partitions match pod
// addresses). A node that is stopped and started again loses its routes and
// rules with its network namespace; StartNode puts them back.
//
// A cluster whose nodes route pod traffic themselves needs none of this: the
// 1.36+ offline node images install podnet as kind's default CNI (a
// DaemonSet labelled podNetworkLabel=routed, tools/images/node/src/podnet),
// and upstream kindest/node images install kindnet. The harness then leaves
// the pod network to that DaemonSet (routingDaemonSet).
const (
	cniConfigPath = "/etc/cni/net.d/10-gauntlet-bridge.conflist"
	// clusterPodRange is kind's default pod subnet.
	clusterPodRange = "10.244.0.0/16"
	// podNetworkLabel marks a DaemonSet that routes pod traffic between
	// nodes (value "routed"); kind's own kindnet is known by its name.
	podNetworkLabel = "gauntlet.dev/pod-network"
)

// routesPods reports whether ds is a pod network that routes between nodes
// by itself: kindnet, or a DaemonSet labelled podNetworkLabel=routed, in
// kube-system.
func routesPods(ds *appsv1.DaemonSet) bool {
	return ds.Namespace == "kube-system" && (ds.Name == "kindnet" || ds.Labels[podNetworkLabel] == "routed")
}

// routingDaemonSet returns the name of the kube-system DaemonSet that
// routes the cluster's pod network, or "" when there is none (the harness
// then routes it).
func routingDaemonSet(ctx context.Context, cl client.Client) (string, error) {
	list := &appsv1.DaemonSetList{}
	if err := cl.List(ctx, list, client.InNamespace("kube-system")); err != nil {
		return "", fmt.Errorf("listing the DaemonSets of kube-system: %w", err)
	}
	for i := range list.Items {
		if routesPods(&list.Items[i]) {
			return list.Items[i].Name, nil
		}
	}
	return "", nil
}

// controlPlanePatch keeps a workload's pods on the control plane node
// (a merge patch of its pod template).
const controlPlanePatch = `{"spec":{"template":{"spec":{"nodeSelector":{"node-role.kubernetes.io/control-plane":""},` +
	`"tolerations":[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists","effect":"NoSchedule"}]}}}}`

// PinToControlPlane makes the Deployments among objs run on the control
// plane node, and returns how many it changed: on the multi-node cluster
// the operator under test then survives the loss of a worker, and a
// node-loss scenario loses members only.
func PinToControlPlane(objs []*unstructured.Unstructured) int {
	n := 0
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		_ = unstructured.SetNestedStringMap(o.Object, map[string]string{"node-role.kubernetes.io/control-plane": ""}, "spec", "template", "spec", "nodeSelector")
		tols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "tolerations")
		tols = append(tols, map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"})
		_ = unstructured.SetNestedSlice(o.Object, tols, "spec", "template", "spec", "tolerations")
		n++
	}
	return n
}

// Workers is how many nodes of the cluster are not a control plane (0 for
// an existing cluster, whose nodes are not the harness's).
func (c *Cluster) Workers() int {
	if c.Existing {
		return 0
	}
	list, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return 0
	}
	n := 0
	for _, nd := range list {
		if role, err := nd.Role(); err == nil && role != "control-plane" {
			n++
		}
	}
	return n
}

// bridgeConfig is the node's CNI conflist for its pod range.
func bridgeConfig(podCIDR string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "gauntlet-bridge",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// nodeNetwork is what one node needs to know to join the pod network.
type nodeNetwork struct {
	name    string
	node    nodes.Node
	ip      string
	podCIDR string
}

// networkScript is the shell a node runs to route the other nodes' pod
// ranges and masquerade what leaves the cluster; it is idempotent.
func networkScript(self nodeNetwork, all []nodeNetwork) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, o := range all {
		if o.name == self.name {
			continue
		}
		fmt.Fprintf(&b, "ip route replace %s via %s\n", o.podCIDR, o.ip)
	}
	rule := fmt.Sprintf("-s %s ! -d %s -j MASQUERADE", self.podCIDR, clusterPodRange)
	fmt.Fprintf(&b, "iptables -t nat -C POSTROUTING %s 2>/dev/null || iptables -t nat -A POSTROUTING %s\n", rule, rule)
	return b.String()
}

// podNetworks reads every node's address and pod range.
func (c *Cluster) podNetworks(ctx context.Context, cl client.Client) ([]nodeNetwork, error) {
	list, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of %s: %w", c.Name, err)
	}
	var out []nodeNetwork
	for _, n := range list {
		ip, _, err := n.IP()
		if err != nil {
			return nil, fmt.Errorf("the address of node %s: %w", n, err)
		}
		var node corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: n.String()}, &node); err != nil {
			return nil, fmt.Errorf("reading node %s: %w", n, err)
		}
		if node.Spec.PodCIDR == "" {
			return nil, fmt.Errorf("node %s has no pod range yet (spec.podCIDR)", n)
		}
		out = append(out, nodeNetwork{name: n.String(), node: n, ip: ip, podCIDR: node.Spec.PodCIDR})
	}
	return out, nil
}

func (c *Cluster) apiClient() (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// joinPodNetwork gives a cluster of several nodes one pod network (see
// above) and recreates the system pods that started with the image's
// single-node range. A single node needs nothing, nor does a cluster whose
// pod network routes itself (routingDaemonSet).
func (c *Cluster) joinPodNetwork(ctx context.Context) error {
	list, err := c.provider.ListInternalNodes(c.Name)
	if err != nil || len(list) < 2 {
		return err
	}
	start := time.Now()
	cl, err := c.apiClient()
	if err != nil {
		return err
	}
	ds, err := routingDaemonSet(ctx, cl)
	if err != nil {
		return err
	}
	if ds != "" {
		if err := keepSystemServicesOnControlPlane(ctx, cl); err != nil {
			return err
		}
		c.progress("pod network of %d nodes routed by DaemonSet kube-system/%s; the harness adds no routes", len(list), ds)
		return nil
	}
	var nets []nodeNetwork
	err = framework.PollFor(ctx, "every node to have a pod range", time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		var err error
		nets, err = c.podNetworks(ctx, cl)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	for _, n := range nets {
		conf, err := bridgeConfig(n.podCIDR)
		if err != nil {
			return err
		}
		cmd := n.node.Command("sh", "-c", "cat > "+cniConfigPath+".tmp && mv "+cniConfigPath+".tmp "+cniConfigPath)
		cmd.SetStdin(bytes.NewReader(conf))
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("writing the CNI config of node %s: %w", n.node, err)
		}
		if err := n.node.Command("sh", "-c", networkScript(n, nets)).Run(); err != nil {
			return fmt.Errorf("routing the pod network on node %s: %w", n.node, err)
		}
	}
	if err := c.recreateMisplacedPods(ctx, cl, nets); err != nil {
		return err
	}
	if err := keepSystemServicesOnControlPlane(ctx, cl); err != nil {
		return err
	}
	c.progress("joined %d nodes in one pod network in %s", len(nets), since(start))
	return nil
}

// keepSystemServicesOnControlPlane keeps the cluster's own services on the
// control plane, as a managed control plane's are: losing a worker then
// loses its members, not the cluster's DNS or volume provisioner as well.
func keepSystemServicesOnControlPlane(ctx context.Context, cl client.Client) error {
	for _, d := range []client.ObjectKey{{Namespace: "kube-system", Name: "coredns"}, {Namespace: "local-path-storage", Name: "local-path-provisioner"}} {
		obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name}}
		if err := cl.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(controlPlanePatch))); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("keeping %s on the control plane: %w", d, err)
		}
	}
	return nil
}

// recreateMisplacedPods deletes the pods whose address is outside their
// node's pod range (started before the node's bridge had it); their
// controllers recreate them on the right range.
func (c *Cluster) recreateMisplacedPods(ctx context.Context, cl client.Client, nets []nodeNetwork) error {
	ranges := map[string]netip.Prefix{}
	for _, n := range nets {
		p, err := netip.ParsePrefix(n.podCIDR)
		if err != nil {
			return fmt.Errorf("node %s pod range %q: %w", n.node, n.podCIDR, err)
		}
		ranges[n.node.String()] = p
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.HostNetwork || p.Status.PodIP == "" {
			continue
		}
		r, ok := ranges[p.Spec.NodeName]
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if !ok || err != nil || r.Contains(ip) {
			continue
		}
		if err := cl.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("recreating pod %s/%s on its node's range: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// NodeNames lists the cluster's nodes (kind's node containers).
func (c *Cluster) NodeNames() ([]string, error) {
	if c.Existing {
		return nil, fmt.Errorf("the nodes of an existing cluster are not the harness's to stop")
	}
	list, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range list {
		out = append(out, n.String())
	}
	slices.Sort(out)
	return out, nil
}

// StopNode kills a node's container at once, as a machine that loses power:
// its kubelet, its pods and its network go with it.
func (c *Cluster) StopNode(ctx context.Context, name string) error {
	if err := c.ownNode(name); err != nil {
		return err
	}
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "docker", "stop", "--time", "0", name).CombinedOutput(); err != nil {
		return fmt.Errorf("docker stop %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	c.progress("stopped node %s in %s", name, since(start))
	return nil
}

// StartNode starts a stopped node's container again and, on a cluster of
// several nodes whose pod network the harness routes, puts its pod routes
// back (they went with its network namespace) once its systemd answers;
// the kubelet then restarts its pods.
func (c *Cluster) StartNode(ctx context.Context, name string) error {
	if err := c.ownNode(name); err != nil {
		return err
	}
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "docker", "start", name).CombinedOutput(); err != nil {
		return fmt.Errorf("docker start %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	list, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return err
	}
	if len(list) > 1 {
		cl, err := c.apiClient()
		if err != nil {
			return err
		}
		// A pod network that routes itself restarts with the node and
		// routes again; the harness only routes its own.
		ds, err := routingDaemonSet(ctx, cl)
		if err != nil {
			return err
		}
		if ds != "" {
			c.progress("started node %s in %s (pod routes: DaemonSet kube-system/%s)", name, since(start), ds)
			return nil
		}
		err = framework.PollFor(ctx, "node "+name+" to route the pod network again", 2*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
			nets, err := c.podNetworks(ctx, cl)
			if err != nil {
				return false, err.Error(), nil
			}
			// Every node's routes: the restarted one lost its own, and its
			// address may have changed for the others.
			for _, n := range nets {
				if err := n.node.Command("sh", "-c", networkScript(n, nets)).Run(); err != nil {
					return false, fmt.Sprintf("node %s: %v", n.node, err), nil
				}
			}
			return true, "", nil
		})
		if err != nil {
			return err
		}
	}
	c.progress("started node %s in %s", name, since(start))
	return nil
}

func (c *Cluster) ownNode(name string) error {
	names, err := c.NodeNames()
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("node %s is not one of cluster %s's %v", name, c.Name, names)
	}
	return nil
}

// NodeCommand runs a command in a node's container (docker exec), for a
// test that prepares the node itself: a directory for a local volume, say.
func (c *Cluster) NodeCommand(ctx context.Context, node string, args ...string) error {
	if err := c.ownNode(node); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", node}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("on node %s, %v: %w: %s", node, args, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// HostAddress is the address at which this machine is reachable from the
// cluster's nodes and pods: the gateway of the Docker network kind puts
// its nodes on. A process here listening on it (the API proxy) serves
// pods through their node's default route.
func (c *Cluster) HostAddress(ctx context.Context) (net.IP, error) {
	if c.Existing {
		if a := c.opts.HostAddress; a != "" {
			ip := net.ParseIP(a)
			if ip == nil {
				return nil, fmt.Errorf("%q is not an IP address: the address at which the pods of cluster %s reach this machine", a, c.Name)
			}
			return ip, nil
		}
		return nil, fmt.Errorf("cluster %s was not made here: its pods' route to this machine is unknown (give it as the host address)", c.Name)
	}
	out, err := exec.CommandContext(ctx, "docker", "network", "inspect", "kind",
		"--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("docker network inspect kind: %w: %s", err, strings.TrimSpace(string(out)))
	}
	for _, f := range strings.Fields(string(out)) {
		if ip := net.ParseIP(f); ip != nil && ip.To4() != nil {
			return ip, nil
		}
	}
	return nil, fmt.Errorf("the kind network has no IPv4 gateway (%q)", strings.TrimSpace(string(out)))
}
