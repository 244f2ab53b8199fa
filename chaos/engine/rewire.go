package engine

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/relay"
	"github.com/gauntlet-dev/gauntlet/chaos/viewfault"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// proxied says whether the operator works through the API proxy on a
// cluster: some scenario of the set makes a view fault, or the caller
// asked for it.
func (e *Engine) proxied() bool {
	return e.o.Proxy || e.o.Set.HasViewFaults()
}

// startClusterProxy starts the API proxy where the cluster's pods reach
// this machine, for a set with view faults: the kind network's gateway
// for a cluster created here, the --proxy-address given for an existing
// one.
func (e *Engine) startClusterProxy(ctx context.Context) error {
	ip, err := e.Cluster.HostAddress(ctx)
	if err != nil {
		return fmt.Errorf("placing the API proxy for the view faults: %w", err)
	}
	p, err := apiproxy.StartWith(e.Config, 0, apiproxy.Options{Listen: net.JoinHostPort(ip.String(), "0"), IPs: []net.IP{ip}, ErrorLog: e.proxyLog()})
	if err != nil {
		return err
	}
	e.view = &viewfault.Access{Proxy: p, Kill: e.killOperatorPods, Target: e.operatorTarget}
	e.proxyAddr = net.JoinHostPort(ip.String(), strconv.Itoa(p.Port()))
	e.logf("API proxy for the view faults at https://%s: the operator's pods are rewired to it", e.proxyAddr)
	return nil
}

// proxyLog prints the proxy's own errors as the run's progress lines.
func (e *Engine) proxyLog() *log.Logger {
	return log.New(e.o.Log, "api-proxy: ", log.Ltime|log.Lmsgprefix)
}

// awaitProxiedOperator waits, once the rewired operator is deployed, for
// its first request through the proxy: pods that cannot reach this
// machine at the proxy's address would otherwise leave every view fault
// acting on nothing.
func (e *Engine) awaitProxiedOperator(ctx context.Context) error {
	if e.view == nil || e.host != nil {
		return nil
	}
	err := framework.PollFor(ctx, "the operator's first request through the API proxy", firstProxiedRequestWithin, 500*time.Millisecond,
		func(context.Context) (bool, string, error) {
			return len(e.view.Proxy.Requests()) > 0, "no request yet at https://" + e.proxyAddr, nil
		})
	if err != nil {
		return fmt.Errorf("the operator's pods do not reach the API proxy at %s (%s): %w", e.proxyAddr, e.proxyHint(), err)
	}
	return nil
}

// How long an operator rewired to the proxy may take to reach it: a
// manager's start and its first list (firstProxiedRequestWithin), and how
// long its pods may stay unready with no request at all before that is
// the verdict (unreachedProxyAfter: a pod whose API server is unreachable
// never becomes ready).
const (
	firstProxiedRequestWithin = 90 * time.Second
	unreachedProxyAfter       = 45 * time.Second
)

// proxyHint says what to check when no request reaches the proxy.
func (e *Engine) proxyHint() string {
	if e.relay != nil {
		return fmt.Sprintf("through the API relay %s/%s, which carried %d connections: see its pod's log", e.operator.Namespace, relay.Name, e.relay.Connections())
	}
	return "is that where they reach this machine? --proxy-address, or leave it out to go through a relay in the cluster"
}

// unreachedProxy is the same verdict while the operator's pods are not
// ready yet: none of its requests reached the proxy in the 45 s since
// it was deployed.
func (e *Engine) unreachedProxy(deployed time.Time) error {
	if e.view == nil || e.host != nil || time.Since(deployed) < unreachedProxyAfter || len(e.view.Proxy.Requests()) > 0 {
		return nil
	}
	return fmt.Errorf("the operator's pods are not ready and none of their requests reached the API proxy at %s in %s (%s)",
		e.proxyAddr, time.Since(deployed).Round(time.Second), e.proxyHint())
}

// rewire points the operator's workloads' pods at the proxy
// (viewfault.Rewire) and returns the objects with the proxy's CA added.
func (e *Engine) rewire(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	n := 0
	for _, u := range objs {
		if !e.isOperatorWorkload(u) {
			continue
		}
		if err := viewfault.Rewire(u, e.proxyAddr); err != nil {
			return nil, fmt.Errorf("rewiring %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		n++
	}
	if n == 0 {
		return nil, e.noOperatorWorkload()
	}
	return append(objs, viewfault.CA(e.operator.Namespace, e.view.Proxy.CAData())), nil
}

// killOperatorPods kills the operator's pods at once (no grace period),
// as a crash would; their Deployment starts new ones.
func (e *Engine) killOperatorPods(ctx context.Context) error {
	pods, err := e.operatorPods(ctx)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return errors.New("no operator pod to kill")
	}
	start := time.Now()
	for i := range pods {
		if err := e.Client.Delete(ctx, &pods[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	e.logf("killed %d operator pods in %s", len(pods), time.Since(start).Round(time.Millisecond))
	return nil
}

// operatorTarget names the operator's pods as a view fault's target.
func (e *Engine) operatorTarget(ctx context.Context) (chaosmesh.Pods, error) {
	pods, err := e.operatorPods(ctx)
	if err != nil {
		return chaosmesh.Pods{}, err
	}
	t := chaosmesh.Pods{Namespace: e.operator.Namespace}
	for _, p := range pods {
		t.Names = append(t.Names, p.Name)
	}
	return t, nil
}
