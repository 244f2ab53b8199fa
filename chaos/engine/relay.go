package engine

import (
	"context"

	"github.com/gauntlet-dev/gauntlet/chaos/relay"
	"github.com/gauntlet-dev/gauntlet/chaos/viewfault"
)

// viaRelay says whether the operator's pods reach the API proxy through
// the relay: asked for, or an existing cluster whose pods' route to this
// machine was not given.
func (e *Engine) viaRelay() bool {
	if !e.proxied() {
		return false
	}
	return e.o.Relay.Always || (e.o.Cluster.Existing && e.o.Cluster.HostAddress == "")
}

func (e *Engine) relayImage() string {
	if e.o.Relay.Image != "" {
		return e.o.Relay.Image
	}
	return relay.Image
}

// startRelayedProxy starts the API proxy on this machine and the relay in
// the operator's namespace that the operator's pods reach it through
// (package relay); the view faults then act on that proxy.
func (e *Engine) startRelayedProxy(ctx context.Context) error {
	r, err := relay.Start(ctx, relay.Options{Config: e.Config, Client: e.Client, Namespace: e.operator.Namespace,
		Image: e.relayImage(), ProxyLog: e.proxyLog(), Logf: e.logf})
	if r != nil {
		e.relay = r
		e.view = &viewfault.Access{Proxy: r.Proxy, Kill: e.killOperatorPods, Target: e.operatorTarget}
		e.proxyAddr = r.Address
	}
	return err
}
