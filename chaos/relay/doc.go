// Package relay carries an in-cluster operator's API connections to the
// API proxy on this machine when the cluster's pods cannot reach it (an
// existing cluster, or asked for with --proxy-relay): a Deployment and
// Service in the operator's namespace that splice bytes, and tunnels the
// harness opens to it over a port-forward, kept across a lost pod
// (framework/apirelay speaks the tunnel protocol). TLS runs from the
// operator to the proxy; the relay holds no credentials.
//
// It owns the path from the operator's pods to the proxy. It must not know
// the proxy's rules or the faults: the engine adds those to Relay.Proxy.
package relay
