// Command podnet is the pod network of Gauntlet's offline kind node images for
// Kubernetes 1.36+: a DaemonSet (files/podnet.yaml, which kind applies from
// /kind/manifests/default-cni.yaml) that does for IPv4 what kind's kindnetd does, because
// kindnetd's module is not served by the module proxy these machines reach. On its node
// it
//
//   - writes the CNI config (bridge + host-local over the node's .spec.podCIDR, portmap)
//     that the node's containerd uses for every pod;
//   - routes every other node's pod range via that node's InternalIP, so pods reach pods
//     on other nodes (the nodes share one Docker network);
//   - masquerades pod traffic that leaves the cluster's pod network, so pods reach the
//     machine running kind and beyond.
//
// It watches the Node objects and reconciles on every change and every 30 s (a node that
// restarts comes back without its routes). Routes it adds carry protocol 180
// (routeProto) so that it removes those of nodes that are gone without touching others.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func main() {
	cniConfig := flag.String("cni-config", "/etc/cni/net.d/10-podnet.conflist", "the CNI config file to write")
	resync := flag.Duration("resync", 30*time.Second, "reconcile at least this often")
	flag.Parse()
	node := os.Getenv("NODE_NAME")
	if node == "" {
		log.Fatal("NODE_NAME is not set (the downward API's spec.nodeName)")
	}
	podSubnets, err := parseSubnets(os.Getenv("POD_SUBNET"))
	if err != nil {
		log.Fatalf("POD_SUBNET: %v", err)
	}

	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatal(err)
	}
	// kind sets CONTROL_PLANE_ENDPOINT (it patches the default CNI manifest): the API
	// server's own address, so that podnet does not need the Service VIP, which only
	// works once kube-proxy has programmed the node.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, o any) { poke(o) },
		DeleteFunc: poke,
	}); err != nil {
		log.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		log.Fatal("node cache never synced")
	}

	r := &reconciler{self: node, podSubnets: podSubnets, cniConfig: *cniConfig, sys: execSystem{}}
	log.Printf("podnet on node %s, pod network %s, CNI config %s", node, strings.Join(podSubnets, ","), *cniConfig)
	tick := time.NewTicker(*resync)
	defer tick.Stop()
	for {
		list, err := nodes.Lister().List(labels.Everything())
		if err != nil {
			log.Printf("listing nodes: %v", err)
		} else if err := r.reconcile(derefNodes(list)); err != nil {
			log.Printf("reconcile: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-tick.C:
		}
	}
}

func derefNodes(list []*corev1.Node) []corev1.Node {
	out := make([]corev1.Node, 0, len(list))
	for _, n := range list {
		out = append(out, *n)
	}
	return out
}

func init() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	log.SetPrefix(fmt.Sprintf("podnet[%d] ", os.Getpid()))
}
