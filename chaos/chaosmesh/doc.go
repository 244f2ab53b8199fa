// Package chaosmesh is the Chaos Mesh driver: it turns a fault aimed at
// named pods into a typed Chaos Mesh object (PodChaos or NetworkChaos,
// from github.com/chaos-mesh/chaos-mesh/api) with the kernel features it
// needs, and runs one Trial of it on a cluster where Chaos Mesh is
// installed: probe the node kernels, inject, wait until Chaos Mesh reports
// every target injected, observe, recover, wait until every target is
// recovered, and check that nothing is left behind (the experiment
// objects, the iptables rules in the targets' network namespaces).
// Faults the harness makes itself (a node stopped, the operator's process
// killed) ride the same Trial as a HarnessFault.
//
// It owns how a fault reaches a pod. It must not know scenario files,
// roles, operators or oracles: the engine resolves roles into Pods, picks
// the experiment, and judges what the Trial observed.
package chaosmesh
