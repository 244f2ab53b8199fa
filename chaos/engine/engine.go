// Package engine runs chaos scenario files (package scenario) on a cluster:
// it deploys the operator an Operator file describes, installs Chaos Mesh,
// and for each Scenario creates the resource under test in a namespace of
// its own, waits until its converged expressions hold, runs the workload,
// resolves the roles and injects the fault (package chaosmesh runs the
// Chaos Mesh experiments), takes the actions, waits for convergence again
// and judges every assertion. It knows no operator: everything it learns
// about one comes from the files. What a run found is a report.Report
// (package report).
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/envtesthost"
	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/chaos/relay"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/viewfault"
	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// Options describe where and what to run.
type Options struct {
	// Cluster is the kind cluster to create, or the existing one to use.
	Cluster cluster.Options
	// Chaos installs Chaos Mesh.
	Chaos install.Options
	// Set is the operator and the scenarios (scenario.LoadPaths).
	Set *scenario.Set
	// Overrides are --set NAME=VALUE variables; they win over the
	// environment and the files' defaults.
	Overrides map[string]string
	// OperatorArgs are appended to the Operator file's args (a bug
	// variant to switch on, a flag to try).
	OperatorArgs []string
	// Relay says how the operator's pods reach the API proxy of view
	// faults through the cluster, when they cannot reach this machine.
	Relay RelayOptions
	// Proxy puts the API proxy in front of the operator on a cluster even
	// when no scenario of the set holds a view fault (an explore
	// campaign holds some of its own).
	Proxy bool
	// Envtest, when set, runs on envtest instead of a cluster: the
	// operator as a process behind the API proxy, no Chaos Mesh.
	Envtest *EnvtestOptions
	// ImagesReady, when set, is waited for once a kind cluster is up and
	// before its images are loaded: the images may still be building
	// while kind makes the cluster.
	ImagesReady func(context.Context) error
	// Artifacts is the run's folder: a failed Setup leaves its evidence
	// under Artifacts/setup (none when empty).
	Artifacts string
	// KeepOnFailure leaves a kind cluster made here running when Setup
	// fails, to look at.
	KeepOnFailure bool
	// Log receives one line per step (default stderr).
	Log io.Writer
}

// RelayOptions place the API relay (cmd/api-relay): a pod in the
// operator's namespace the operator's pods connect to, tunnelled to the
// API proxy on this machine over a port-forward. An existing cluster with
// no Cluster.HostAddress uses it.
type RelayOptions struct {
	// Always uses it on a kind cluster created here too (whose pods
	// otherwise reach the proxy on the kind network's gateway).
	Always bool
	// Image is the relay's image (default relay.Image), loaded into a
	// kind cluster created here; an existing cluster's nodes must pull it.
	Image string
}

// Engine is a cluster with the operator and Chaos Mesh, ready to run the
// scenarios of a set.
type Engine struct {
	o        Options
	Cluster  *cluster.Cluster
	Config   *rest.Config
	Client   client.Client
	Dynamic  dynamic.Interface
	Mapper   meta.ResettableRESTMapper
	Runner   *chaosmesh.Runner
	operator *scenario.OperatorSpec
	opVars   render.Vars
	// mu guards seq, switches and the slowest waits, which scenarios run
	// side by side share.
	mu     sync.Mutex
	seq    int
	scheme *runtime.Scheme
	// host is set on envtest.
	host *envtesthost.Host
	// metrics is how the operator's metrics are scraped.
	metrics metricsAccess
	// view is the API proxy in front of the operator, set on envtest and
	// on a kind cluster whose set has view faults; proxyAddr is where the
	// cluster's pods reach it.
	view      *viewfault.Access
	proxyAddr string
	// relay is set when the operator's pods reach the proxy through the
	// API relay.
	relay *relay.Relay
	// noise is what differed between two fault-free runs (paths with
	// list indexes written [*]), and calibrated says it was learned.
	noise      compare.Noise
	calibrated bool
	// refusable are, by scenario, the spec fields a run set that the
	// operator may refuse (ExpectRefusal).
	refusable map[string][]string
	// switches are, by kind, its spec's booleans that are off unless set,
	// which the effect oracle reads (learnSwitches).
	switches map[schema.GroupVersionKind][]string
	// slowestConverge and slowestDeletion are the longest a wait to
	// converge, and for the resource to go, that ended so has taken here:
	// what a campaign's patience is learned from.
	slowestConverge, slowestDeletion time.Duration
	// stillHolds, set while a campaign runs, ends a hold once the
	// operator has asked the API proxy nothing for so long since the
	// run's actions ended (run.still); 0 holds every fault whole.
	stillHolds time.Duration
}

// Setup creates (or adopts) the cluster, loads the images, deploys the
// operator and waits for its pods, then installs Chaos Mesh.
func Setup(ctx context.Context, o Options) (*Engine, error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.Set == nil || o.Set.Operator == nil {
		return nil, errors.New("engine: no Operator file in the set")
	}
	o.Cluster.Log = o.Log
	spec := o.Set.Operator.Spec
	spec.Args = append(append([]string(nil), spec.Args...), o.OperatorArgs...)
	e := &Engine{o: o, operator: &spec}
	e.opVars = render.Vars{Overrides: o.Overrides, Defaults: e.operator.Variables}
	e.scheme = runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(e.scheme), chaosv1alpha1.AddToScheme(e.scheme)); err != nil {
		return nil, err
	}
	if o.Envtest != nil {
		return e.setupHermetic(ctx)
	}
	c, err := cluster.Start(ctx, o.Cluster)
	if err != nil {
		return nil, e.setupFailed(ctx, "cluster", err)
	}
	e.Cluster = c
	// fail keeps the evidence of a failed step, then deletes the cluster
	// unless it is to be kept for a look.
	fail := func(step string, err error) (*Engine, error) {
		se := e.setupFailed(ctx, step, err)
		if o.KeepOnFailure {
			c.Keep()
		}
		if terr := c.Teardown(); terr != nil {
			return nil, errors.Join(se, fmt.Errorf("teardown: %w", terr))
		}
		return nil, se
	}
	if e.Config, e.Client, err = c.Connect(ctx, e.scheme); err != nil {
		return fail("cluster", err)
	}
	if err := e.clients(); err != nil {
		return fail("cluster", err)
	}
	if err := e.loadImages(ctx); err != nil {
		return fail("images", err)
	}
	if e.proxied() {
		start := e.startClusterProxy
		if e.viaRelay() {
			start = e.startRelayedProxy
		}
		if err := start(ctx); err != nil {
			return fail("API proxy", err)
		}
	}
	if err := e.deployOperator(ctx); err != nil {
		return fail("operator", err)
	}
	if err := e.awaitProxiedOperator(ctx); err != nil {
		return fail("operator", err)
	}
	if err := e.grantMetrics(ctx); err != nil {
		return fail("metrics access", err)
	}
	o.Chaos.Log = o.Log
	inst, err := install.Install(ctx, e.Config, o.Chaos)
	if err != nil {
		return fail("Chaos Mesh", err)
	}
	e.Runner = &chaosmesh.Runner{Config: e.Config, Client: e.Client, ChaosNamespace: inst.Namespace, Log: o.Log}
	feats, err := e.Runner.Features(ctx)
	if err != nil {
		return fail("Chaos Mesh", fmt.Errorf("probing the node kernel: %w", err))
	}
	var have []string
	for f, ferr := range feats {
		have = append(have, fmt.Sprintf("%s=%v", f, ferr == nil))
	}
	e.logf("Chaos Mesh installed in %s; kernel offers %s", inst.Duration.Round(time.Millisecond), strings.Join(have, " "))
	return e, nil
}

// loadImages waits for images still building (Options.ImagesReady) and
// loads them into a kind cluster created here.
func (e *Engine) loadImages(ctx context.Context) error {
	if e.o.ImagesReady != nil {
		if err := e.o.ImagesReady(ctx); err != nil {
			return err
		}
	}
	if e.Cluster.Existing {
		return nil
	}
	return e.Cluster.LoadImages(ctx, e.images()...)
}

// images are what a kind cluster created here is loaded with: the
// Operator file's, Chaos Mesh's and the API relay's when it is used.
func (e *Engine) images() []string {
	var images []string
	for _, img := range e.operator.Images {
		images = append(images, e.opVars.Expand(img.Name))
	}
	images = append(images, e.o.Chaos.ControllerImage, e.o.Chaos.DaemonImage)
	if e.viaRelay() {
		images = append(images, e.relayImage())
	}
	return images
}

// setupHermetic brings up envtest, the operator's process and its proxy.
func (e *Engine) setupHermetic(ctx context.Context) (*Engine, error) {
	if err := e.setupEnvtest(ctx); err != nil {
		if e.host != nil {
			err = errors.Join(err, e.host.Teardown())
		}
		return nil, err
	}
	e.Client = e.host.Env.Client
	if err := e.clients(); err != nil {
		return nil, errors.Join(err, e.host.Teardown())
	}
	e.Runner = &chaosmesh.Runner{Config: e.Config, Client: e.Client, Log: e.o.Log, Unavailable: "envtest has no nodes and no Chaos Mesh: this fault needs a cluster (gauntlet run without --envtest)"}
	return e, nil
}

// clients makes the dynamic client and the REST mapper.
func (e *Engine) clients() error {
	var err error
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return err
	}
	e.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return nil
}

// relayStopWithin bounds removing the API relay at teardown (its
// Deployment, Service and RBAC deleted, its pod gone).
const relayStopWithin = 30 * time.Second

// Teardown deletes the cluster (unless kept or existing), or stops
// envtest and the operator's process.
func (e *Engine) Teardown() error {
	if e.host != nil {
		return e.host.Teardown()
	}
	var err error
	if e.relay != nil {
		ctx, cancel := context.WithTimeout(context.Background(), relayStopWithin)
		err = e.relay.Stop(ctx)
		cancel()
	}
	if e.view != nil {
		_ = e.view.Proxy.Close()
	}
	return errors.Join(err, e.Cluster.Teardown())
}

// nextSeq numbers a run's namespace.
func (e *Engine) nextSeq() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	return e.seq
}

// slowest records how long a wait that ended took (max into *d).
func (e *Engine) slowest(d *time.Duration, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	*d = max(*d, took)
}

// Name names where the set runs, for the report.
func (e *Engine) Name() string {
	if e.host != nil {
		return "envtest"
	}
	return e.Cluster.Name
}

func (e *Engine) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(e.o.Log, "%s engine: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Logf writes one line of progress to the engine's log, for what drives
// it (an explore campaign).
func (e *Engine) Logf(format string, args ...any) { e.logf(format, args...) }

// Set is the Operator file and the scenarios the engine was set up with.
// A scenario made after setup (a campaign's) is run once its file's path,
// which its manifest is found beside, is in the set's Files.
func (e *Engine) Set() *scenario.Set { return e.o.Set }

// Overrides are the run's --set variables.
func (e *Engine) Overrides() map[string]string { return e.o.Overrides }

// OnEnvtest says the operator runs as a process on envtest, where no pod
// runs, rather than on a cluster's nodes.
func (e *Engine) OnEnvtest() bool { return e.host != nil }

// Object is s's resource as a run creates it, its variables expanded.
func (e *Engine) Object(s *scenario.Scenario) (*unstructured.Unstructured, error) {
	return render.Resource(e.o.Set, s, render.Vars{Overrides: e.o.Overrides, Defaults: s.Spec.Variables})
}

// Slowest are the longest a wait to converge, and for a resource to go,
// that ended so has taken on this engine: what a campaign's patience is
// learned from.
func (e *Engine) Slowest() (converge, deletion time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slowestConverge, e.slowestDeletion
}

// EndHoldsWhenStill ends a view fault's hold once the operator has asked
// the API proxy nothing for d since the run's actions ended; 0 (the
// default) holds every fault whole. A campaign sets it: its hundreds of
// runs would otherwise wait out holds sized for the busiest step.
func (e *Engine) EndHoldsWhenStill(d time.Duration) { e.stillHolds = d }

// Requests are the operator's requests through the API proxy so far, and
// whether there is one (envtest, or a cluster whose set holds view
// faults or that asked for it).
func (e *Engine) Requests() ([]apiproxy.Request, bool) {
	if e.view == nil {
		return nil, false
	}
	return e.view.Proxy.Requests(), true
}

// deployOperator renders the operator's manifests, swaps its images,
// appends its arguments, applies it and waits until its pods are ready.
func (e *Engine) deployOperator(ctx context.Context) error {
	start := time.Now()
	objs, err := e.renderOperator()
	if err != nil {
		return err
	}
	argsDone := len(e.operator.Args) == 0 && len(e.operator.Env) == 0
	for _, img := range e.operator.Images {
		if img.Replaces == "" {
			continue
		}
		name := e.opVars.Expand(img.Name)
		if cluster.SetImage(objs, img.Replaces, name) == 0 {
			return fmt.Errorf("no container in the operator's manifests runs %s", img.Replaces)
		}
		if e.Cluster != nil && !e.Cluster.Existing {
			cluster.PullIfNotPresent(objs, name) // loaded into the nodes, in no registry
		}
		if !argsDone {
			cluster.AppendArgs(objs, name, e.opVars.ExpandAll(e.operator.Args)...)
			env := map[string]string{}
			for k, v := range e.operator.Env {
				env[k] = e.opVars.Expand(v)
			}
			cluster.SetEnv(objs, name, env)
			argsDone = true
		}
	}
	if !argsDone {
		return errors.New("spec.args and spec.env need an image with replaces: the container to set them on")
	}
	if e.view != nil {
		if objs, err = e.rewire(objs); err != nil {
			return err
		}
	}
	if e.Cluster != nil && e.Cluster.Workers() > 0 {
		// On a cluster with workers the operator stays on the control
		// plane: a node-loss scenario loses members, not the operator.
		e.logf("keeping %d operator workloads on the control plane (the cluster has workers to lose)", cluster.PinToControlPlane(objs))
	}
	d, err := cluster.Deploy(ctx, e.Config, objs, cluster.DeployOptions{Namespace: e.operator.Namespace})
	if err != nil {
		return err
	}
	e.logf("applied %d operator objects in %s (%d warnings)", len(d.Applied), time.Since(start).Round(time.Millisecond), len(d.Warnings))
	if err := e.awaitOperatorReady(ctx, "the operator's pods to be ready", start, nil); err != nil {
		return err
	}
	e.logf("operator ready after %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// awaitOperatorReady waits until every operator pod is ready and none of
// gone (pods killed) is listed any more; a pod that will not start, or
// rewired pods whose requests never reached the proxy since start, end
// the wait at once.
func (e *Engine) awaitOperatorReady(ctx context.Context, what string, start time.Time, gone []corev1.Pod) error {
	guard, err := e.podGuard(e.operator.Namespace, e.operator.Selector, "the operator's pods")
	if err != nil {
		return err
	}
	return framework.PollFor(ctx, what, operatorReadyWithin, time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := e.operatorPods(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if err := guard.Check(ctx); err != nil {
			return false, "", err // a pod that will not start: no use waiting
		}
		ready := 0
		for i := range pods {
			if slices.ContainsFunc(gone, func(k corev1.Pod) bool { return k.UID == pods[i].UID }) {
				return false, fmt.Sprintf("killed pod %s still listed", pods[i].Name), nil
			}
			if framework.PodReady(&pods[i]) {
				ready++
			}
		}
		if ready < len(pods) || ready == 0 {
			if err := e.unreachedProxy(start); err != nil {
				return false, "", err // rewired pods that cannot reach the proxy will not get ready
			}
		}
		return ready > 0 && ready == len(pods), fmt.Sprintf("%d of %d operator pods ready", ready, len(pods)), nil
	})
}

// operatorPods are the running operator pods.
func (e *Engine) operatorPods(ctx context.Context) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(e.operator.Namespace), client.MatchingLabels(e.operator.Selector)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out, nil
}
