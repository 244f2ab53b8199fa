// Package podstate says why pods are not becoming ready when waiting will
// not help: a container in a crash loop, an image that cannot be pulled or
// is not on the node, a container that cannot be created or its volumes
// mounted, a pod no node takes, a pod admission refuses to create. A
// Watcher tells a transient state (an operator that crashes once while its
// webhook certificate is mounted) from a stuck one by how long it lasts,
// and Evidence gathers what shows the cause: the pod's state, its image,
// the tail of its log and its events.
//
// It knows pods, events and the kubelet's reasons, nothing of an operator
// or a scenario: the engine uses it for the operator's pods, Chaos Mesh's
// and a resource's, and so can any test that waits for pods.
package podstate
