package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// Environment variables of the cluster backend.
const (
	// EnvKeepCluster=1 leaves the kind cluster running after the tests, for
	// debugging; its name and kubeconfig are printed.
	EnvKeepCluster = "GAUNTLET_KEEP_CLUSTER"
	// EnvExistingCluster=1 runs against the cluster of KUBECONFIG (its
	// current context) instead of creating a kind cluster: the same suites
	// then run on any real, multi-node cluster.
	EnvExistingCluster = "GAUNTLET_EXISTING_CLUSTER"

	// DefaultNodeImage is the kind node image make node-image builds
	// offline, and DefaultKindConfig the single-node config for it
	// (relative to the repository): the defaults of the e2e tier, the
	// chaos tier and the gauntlet CLI.
	DefaultNodeImage  = "gauntlet.dev/kind-node:v1.35.4"
	DefaultKindConfig = "cluster/kindconfig/single-node.yaml"
)

// Options describe the cluster a suite runs on.
type Options struct {
	// Name of the kind cluster; a unique "gauntlet-<random>" when empty.
	Name string
	// NodeImage is the kind node image (for example a locally built
	// gauntlet.dev/kind-node:v1.35.4, or kindest/node for online users).
	NodeImage string
	// ConfigFile is a kind Cluster config (KindConfigFile writes the
	// built-in ones).
	ConfigFile string
	// Attempts bounds cluster creation, which can fail on boot flakes
	// (2 when zero): a failed attempt's cluster is deleted and retried.
	Attempts int
	// WaitForReady is how long creation waits for the control plane (3m
	// when zero).
	WaitForReady time.Duration
	// Keep leaves the cluster running at Teardown (EnvKeepCluster sets it).
	Keep bool
	// Existing uses the cluster of Kubeconfig (or KUBECONFIG) instead of
	// creating one (EnvExistingCluster sets it).
	Existing bool
	// Kubeconfig is where the cluster's kubeconfig is written (a temporary
	// file when empty), or read from with Existing.
	Kubeconfig string
	// HostAddress is the address at which an existing cluster's pods
	// reach this machine, for a server the harness runs here (the API
	// proxy of view faults). A cluster created here is on the kind
	// network, whose gateway it is.
	HostAddress string
	// Log receives progress lines (os.Stderr when nil).
	Log io.Writer
}

// Cluster is a running cluster: a kind cluster this process created, or an
// existing one.
type Cluster struct {
	Name       string
	Kubeconfig string
	// Existing is true when the cluster was not created here; it is never
	// deleted, and images are not loaded into it (push them to a registry
	// it can pull from).
	Existing bool

	opts     Options
	provider *kindcluster.Provider
	log      io.Writer
	mu       sync.Mutex
}

// Start creates a kind cluster (or adopts the existing one) and
// returns once its API server answers. Every step prints a progress line
// with its duration.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if os.Getenv(EnvKeepCluster) == "1" {
		o.Keep = true
	}
	if os.Getenv(EnvExistingCluster) == "1" {
		o.Existing = true
	}
	c := &Cluster{opts: o, log: o.Log}
	if o.Existing {
		c.Existing = true
		c.Kubeconfig = o.Kubeconfig
		if c.Kubeconfig == "" {
			c.Kubeconfig = os.Getenv("KUBECONFIG")
		}
		if c.Kubeconfig == "" {
			return nil, fmt.Errorf("%s=1 needs a kubeconfig: set KUBECONFIG or Options.Kubeconfig", EnvExistingCluster)
		}
		c.progress("using the existing cluster of %s", c.Kubeconfig)
		return c, nil
	}
	o, err := o.forKind()
	if err != nil {
		return nil, err
	}
	c.Name, c.Kubeconfig, c.opts = o.Name, o.Kubeconfig, o
	c.provider = kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(&kindLogger{w: o.Log}))

	var errs []error
	for attempt := 1; attempt <= o.Attempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		c.progress("creating kind cluster %s (node image %s, attempt %d of %d)", o.Name, o.NodeImage, attempt, o.Attempts)
		err := c.provider.Create(o.Name, o.createOptions()...)
		if err == nil {
			c.progress("created kind cluster %s in %s (kubeconfig %s)", o.Name, since(start), o.Kubeconfig)
			if err = c.joinPodNetwork(ctx); err == nil {
				return c, nil
			}
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		c.progress("creating kind cluster %s failed after %s: %v", o.Name, since(start), err)
		if derr := c.provider.Delete(o.Name, o.Kubeconfig); derr != nil {
			errs = append(errs, fmt.Errorf("deleting the failed attempt: %w", derr))
		}
	}
	return nil, fmt.Errorf("creating kind cluster %s: %w", o.Name, errors.Join(errs...))
}

// forKind fills in what creating a kind cluster needs and o leaves out: a
// random name, a temporary kubeconfig file, two attempts, a 3m wait.
func (o Options) forKind() (Options, error) {
	if o.Name == "" {
		suffix := make([]byte, 3)
		if _, err := rand.Read(suffix); err != nil {
			return o, err
		}
		o.Name = "gauntlet-" + hex.EncodeToString(suffix)
	}
	if o.Kubeconfig == "" {
		f, err := os.CreateTemp("", o.Name+"-kubeconfig-*")
		if err != nil {
			return o, err
		}
		_ = f.Close()
		o.Kubeconfig = f.Name()
	}
	if o.Attempts == 0 {
		o.Attempts = 2
	}
	if o.WaitForReady == 0 {
		o.WaitForReady = 3 * time.Minute
	}
	return o, nil
}

// createOptions are kind's options for creating the cluster o describes.
func (o Options) createOptions() []kindcluster.CreateOption {
	opts := []kindcluster.CreateOption{
		kindcluster.CreateWithKubeconfigPath(o.Kubeconfig),
		kindcluster.CreateWithWaitForReady(o.WaitForReady),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	}
	if o.NodeImage != "" {
		opts = append(opts, kindcluster.CreateWithNodeImage(o.NodeImage))
	}
	if o.ConfigFile != "" {
		opts = append(opts, kindcluster.CreateWithConfigFile(o.ConfigFile))
	}
	return opts
}

// LoadImages copies local Docker images into every node, as `kind load
// docker-image` does.
func (c *Cluster) LoadImages(ctx context.Context, images ...string) error {
	if c.Existing {
		return fmt.Errorf("cannot load images into an existing cluster: push %v to a registry it pulls from", images)
	}
	nodes, err := c.provider.ListInternalNodes(c.Name)
	if err != nil {
		return fmt.Errorf("listing the nodes of %s: %w", c.Name, err)
	}
	for _, image := range images {
		start := time.Now()
		dir, err := os.MkdirTemp("", "gauntlet-image-")
		if err != nil {
			return err
		}
		tar := filepath.Join(dir, "image.tar")
		out, err := exec.CommandContext(ctx, "docker", "save", "-o", tar, image).CombinedOutput()
		if err != nil {
			_ = os.RemoveAll(dir)
			return fmt.Errorf("docker save %s: %w: %s", image, err, strings.TrimSpace(string(out)))
		}
		for _, n := range nodes {
			if err := c.loadArchive(ctx, n, tar); err != nil {
				_ = os.RemoveAll(dir)
				return fmt.Errorf("loading %s into node %s: %w", image, n.String(), err)
			}
		}
		_ = os.RemoveAll(dir)
		c.progress("loaded image %s into %d node(s) in %s", image, len(nodes), since(start))
	}
	return nil
}

// loadAttempts is how many times an image archive is imported into a node
// before the load fails: containerd's import can fail once on a node that
// is still settling.
const loadAttempts = 2

// loadRetryPause is the pause before importing again.
var loadRetryPause = 5 * time.Second

// loadArchive imports the image archive at tar into node n with
// containerd's ctr, as kind does, and on failure says what ctr printed.
func (c *Cluster) loadArchive(ctx context.Context, n nodes.Node, tar string) error {
	var err error
	tries := 0
	werr := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: loadRetryPause, Steps: loadAttempts}, func(context.Context) (bool, error) {
		if tries++; tries > 1 {
			c.progress("importing into %s failed (%v); trying again", n.String(), err)
		}
		f, openErr := os.Open(tar)
		if openErr != nil {
			return false, openErr // no second try mends a missing archive
		}
		err = nodeutils.LoadImageArchive(n, f)
		_ = f.Close()
		if run := kindexec.RunErrorForError(err); run != nil && len(run.Output) > 0 {
			err = fmt.Errorf("%w: ctr printed: %s", err, lastLines(string(run.Output), 5))
		}
		return err == nil, nil
	})
	switch {
	case werr == nil:
		return nil
	case err == nil:
		return werr // the archive could not be opened, or ctx ended first
	}
	// A full disk is the usual cause that ctr does not name well.
	if out, dfErr := kindexec.Output(n.CommandContext(ctx, "df", "-h", "/var/lib/containerd")); dfErr == nil {
		err = fmt.Errorf("%w (the node's disk: %s)", err, lastLines(string(out), 1))
	}
	return err
}

// lastLines is the end of s, at most n lines of it.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// ExportLogs writes kind's logs (every node's journal, kubelet and
// container logs) under dir.
func (c *Cluster) ExportLogs(dir string) error {
	if c.Existing {
		return nil
	}
	start := time.Now()
	if err := c.provider.CollectLogs(c.Name, dir); err != nil {
		return fmt.Errorf("exporting kind logs of %s: %w", c.Name, err)
	}
	c.progress("exported kind logs of %s to %s in %s", c.Name, dir, since(start))
	return nil
}

// Keep makes Teardown leave the cluster running (and say how to reach
// it), as Options.Keep does: for a look after a failure.
func (c *Cluster) Keep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.Keep = true
}

// Teardown deletes the cluster unless it is an existing one or Keep is set
// (then it says how to reach it and how to delete it).
func (c *Cluster) Teardown() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.Existing:
		return nil
	case c.opts.Keep:
		c.progress("keeping kind cluster %s: KUBECONFIG=%s kubectl get pods -A; delete it with: kind delete cluster --name %s", c.Name, c.Kubeconfig, c.Name)
		return nil
	}
	start := time.Now()
	if err := c.provider.Delete(c.Name, c.Kubeconfig); err != nil {
		return fmt.Errorf("deleting kind cluster %s: %w", c.Name, err)
	}
	_ = os.Remove(c.Kubeconfig)
	c.progress("deleted kind cluster %s in %s", c.Name, since(start))
	return nil
}

func (c *Cluster) progress(format string, args ...any) {
	_, _ = fmt.Fprintf(c.log, "%s cluster: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// kindLogger passes kind's user-facing messages (V(0)) and warnings on.
type kindLogger struct{ w io.Writer }

func (l *kindLogger) Warn(m string)                        { l.printf("kind: warning: %s", m) }
func (l *kindLogger) Warnf(f string, a ...any)             { l.printf("kind: warning: "+f, a...) }
func (l *kindLogger) Error(m string)                       { l.printf("kind: error: %s", m) }
func (l *kindLogger) Errorf(f string, a ...any)            { l.printf("kind: error: "+f, a...) }
func (l *kindLogger) V(v kindlog.Level) kindlog.InfoLogger { return kindInfo{l: l, on: v <= 0} }
func (l *kindLogger) printf(f string, a ...any) {
	_, _ = fmt.Fprintf(l.w, "%s %s\n", time.Now().Format("15:04:05"), strings.TrimRight(fmt.Sprintf(f, a...), "\n"))
}

type kindInfo struct {
	l  *kindLogger
	on bool
}

func (i kindInfo) Info(m string) {
	if i.on {
		i.l.printf("kind: %s", m)
	}
}

func (i kindInfo) Infof(f string, a ...any) {
	if i.on {
		i.l.printf("kind: "+f, a...)
	}
}

func (i kindInfo) Enabled() bool { return i.on }

// WaitSystemReady waits until every Deployment and DaemonSet in the given
// system namespaces (kube-system and the storage provisioner's, by default)
// is ready. A node can be Ready before kube-proxy routes Service IPs, and a
// pod that calls the API server's Service address then fails: workloads of
// the tests start only once the cluster's own have.
func (c *Cluster) WaitSystemReady(ctx context.Context, cl client.Client, timeout time.Duration, namespaces ...string) error {
	if len(namespaces) == 0 {
		namespaces = []string{"kube-system", "local-path-storage"}
	}
	start := time.Now()
	err := framework.PollFor(ctx, "the cluster's system workloads to be ready", timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		var waiting []string
		for _, ns := range namespaces {
			deps := &appsv1.DeploymentList{}
			if err := cl.List(ctx, deps, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			for _, d := range deps.Items {
				if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < ptr.Deref(d.Spec.Replicas, 1) {
					waiting = append(waiting, fmt.Sprintf("deployment %s/%s %d/%d available", ns, d.Name, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1)))
				}
			}
			dss := &appsv1.DaemonSetList{}
			if err := cl.List(ctx, dss, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			for _, d := range dss.Items {
				if d.Status.DesiredNumberScheduled == 0 || d.Status.NumberReady < d.Status.DesiredNumberScheduled {
					waiting = append(waiting, fmt.Sprintf("daemonset %s/%s %d/%d ready", ns, d.Name, d.Status.NumberReady, d.Status.DesiredNumberScheduled))
				}
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "\n"), nil
	})
	if err != nil {
		return err
	}
	c.progress("system workloads of %s ready after %s", c.Name, since(start))
	return nil
}

// Connect returns a client config for the cluster (QPS 50, burst 100: a
// test drives many objects) and a client with scheme, once the cluster's
// own workloads are ready (WaitSystemReady, up to three minutes).
func (c *Cluster) Connect(ctx context.Context, scheme *runtime.Scheme) (*rest.Config, client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	if err := c.WaitSystemReady(ctx, cl, 3*time.Minute); err != nil {
		return nil, nil, err
	}
	return cfg, cl, nil
}

// BundleLogs is what framework.BundleOptions.Logs takes: kind's node logs,
// or nil for an adopted cluster (its logs are not ours to export).
func (c *Cluster) BundleLogs() func(dir string) error {
	if c == nil || c.Existing {
		return nil
	}
	return c.ExportLogs
}
