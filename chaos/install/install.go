// Package install puts Chaos Mesh on a cluster (kind, or any cluster a
// rest.Config reaches) without Helm, cert-manager or the internet: the
// CRDs and a minimal set of manifests are embedded, the certificates of
// the admission webhooks and of the controller-daemon gRPC link are
// generated at install time and kept in Secrets, everything is applied
// server-side under one field owner, and Install returns only once the
// controller's webhooks answer and a daemon is ready on every schedulable
// node.
//
// Install is idempotent: a second run reuses the stored certificates while
// they are valid and changes nothing. Uninstall removes what Install made,
// after letting the controller recover any chaos still running.
//
// One installation per cluster: the CRDs are cluster-wide.
package install

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/cluster/podstate"
)

// Defaults of Options.
const (
	DefaultNamespace       = "chaos-mesh"
	DefaultControllerImage = "gauntlet.dev/chaos-controller-manager:v0.9.1-47411975a8cb"
	DefaultDaemonImage     = "gauntlet.dev/chaos-daemon:v0.9.1-47411975a8cb"
	// DefaultPauseImage is what pod-failure swaps a container's image for;
	// kind node images carry it.
	DefaultPauseImage = "registry.k8s.io/pause:3.10.1"
	// DefaultRuntimeSocket is containerd's socket on the nodes.
	DefaultRuntimeSocket = "/run/containerd/containerd.sock"
	DefaultTimeout       = 5 * time.Minute
)

// Chaos Mesh's release images that run with what this package installs:
// ReleaseTag is the release the offline images' source follows (its Helm
// chart names it), and ReleaseRegistry is where Chaos Mesh publishes.
const (
	ReleaseTag      = "v2.8.4"
	ReleaseRegistry = "ghcr.io"
)

// ReleaseImages are the controller's and the daemon's ReleaseTag images
// in registry (ReleaseRegistry when empty), named as Chaos Mesh's Helm
// chart names them from its images.registry value: a mirror of
// ghcr.io, say registry.example.com/ghcr, serves
// registry.example.com/ghcr/chaos-mesh/chaos-mesh:v2.8.4.
func ReleaseImages(registry string) (controller, daemon string) {
	if registry == "" {
		registry = ReleaseRegistry
	}
	registry = strings.TrimSuffix(registry, "/")
	return registry + "/chaos-mesh/chaos-mesh:" + ReleaseTag, registry + "/chaos-mesh/chaos-daemon:" + ReleaseTag
}

// FieldOwner is the server-side apply field manager of every object
// Install applies.
const FieldOwner = "gauntlet-chaos-install"

// Names of what Install runs.
const (
	ControllerDeployment = "chaos-controller-manager"
	DaemonSet            = "chaos-daemon"
	// ControllerService fronts the admission webhooks.
	ControllerService = "chaos-mesh-controller-manager"
)

// Options describe an installation. The zero value installs the default
// images into DefaultNamespace.
type Options struct {
	// Namespace of the controller and the daemons (DefaultNamespace when
	// empty). It is labelled for the privileged Pod Security level.
	Namespace string
	// ControllerImage and DaemonImage (the defaults when empty) must be
	// present on the nodes or pullable: pods use IfNotPresent.
	ControllerImage, DaemonImage string
	// PauseImage replaces a container's image during pod-failure
	// (DefaultPauseImage when empty).
	PauseImage string
	// RuntimeSocket is the host path of containerd's socket on the nodes
	// (DefaultRuntimeSocket when empty).
	RuntimeSocket string
	// Timeout bounds the whole Install or Uninstall, readiness included
	// (DefaultTimeout when zero).
	Timeout time.Duration
	// Log receives one progress line per step with its duration (os.Stderr
	// when nil; io.Discard to silence).
	Log io.Writer
}

func (o Options) withDefaults() (Options, error) {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&o.Namespace, DefaultNamespace)
	def(&o.ControllerImage, DefaultControllerImage)
	def(&o.DaemonImage, DefaultDaemonImage)
	def(&o.PauseImage, DefaultPauseImage)
	def(&o.RuntimeSocket, DefaultRuntimeSocket)
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if !path.IsAbs(o.RuntimeSocket) || path.Clean(o.RuntimeSocket) == "/" {
		return o, fmt.Errorf("RuntimeSocket %q: want the absolute host path of the socket", o.RuntimeSocket)
	}
	for _, s := range []string{o.Namespace, o.ControllerImage, o.DaemonImage, o.PauseImage, o.RuntimeSocket} {
		if strings.ContainsAny(s, " \t\n\"'{}") {
			return o, fmt.Errorf("option %q: no spaces, quotes or braces allowed", s)
		}
	}
	return o, nil
}

// Installation is what Install did.
type Installation struct {
	Namespace string
	// Applied lists kind/namespace/name of every object applied.
	Applied []string
	// Changed lists the applied objects the apply created or modified:
	// empty when Install ran over an identical installation.
	Changed []string
	// CertificatesReused is true when valid certificates were found in the
	// cluster and kept; otherwise new ones were issued because of
	// CertificatesReason (and the pods rolled to load them).
	CertificatesReused bool
	CertificatesReason string
	// Warnings are the API server's warnings during the apply.
	Warnings []string
	// Steps are the steps run, with their durations, and Duration the
	// total.
	Steps    []Step
	Duration time.Duration
}

// Step is one timed step of Install or Uninstall.
type Step struct {
	Name     string
	Duration time.Duration
}

// Install applies Chaos Mesh and waits until it works: CRDs established,
// the controller Deployment available, a daemon ready on every schedulable
// node, and the controller's admission webhooks answering (a server-side
// dry-run create of a PodChaos goes through). On timeout the error says
// what was last seen (pod phases, containers' waiting reasons).
func Install(ctx context.Context, cfg *rest.Config, o Options) (*Installation, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	inst := &Installation{Namespace: o.Namespace}
	r := &run{log: o.Log, steps: &inst.Steps}
	cfg = clientConfig(cfg)
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}

	var certs *certificates
	err = r.step("certificates", func() (string, error) {
		var err error
		certs, inst.CertificatesReused, inst.CertificatesReason, err = ensureCertificates(ctx, c, o.Namespace, time.Now())
		switch {
		case err != nil:
			return "", err
		case inst.CertificatesReused:
			return "reused the stored certificates (" + certs.fingerprint() + ")", nil
		}
		return "issued new certificates (" + certs.fingerprint() + "): " + inst.CertificatesReason, nil
	})
	if err != nil {
		return inst, err
	}

	err = r.step("apply", func() (string, error) {
		objs, err := render(o, certs)
		if err != nil {
			return "", err
		}
		before, err := versions(ctx, c, objs)
		if err != nil {
			return "", err
		}
		d, err := cluster.Deploy(ctx, cfg, objs, cluster.DeployOptions{FieldManager: FieldOwner, Timeout: o.Timeout})
		if d != nil {
			inst.Applied, inst.Warnings = d.Applied, d.Warnings
		}
		if err != nil {
			return "", err
		}
		after, err := versions(ctx, c, objs)
		if err != nil {
			return "", err
		}
		inst.Changed = changed(before, after)
		return fmt.Sprintf("applied %d objects (%d created or changed, CRDs established), %d warnings", len(inst.Applied), len(inst.Changed), len(inst.Warnings)), nil
	})
	if err != nil {
		return inst, err
	}

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return inst, err
	}
	// A pod that will not start ends the wait at once, with its evidence.
	guard := func(component string) *podstate.Guard {
		return &podstate.Guard{Client: cs, Namespace: o.Namespace, Selector: selector(component), What: "Chaos Mesh's " + component + " pods"}
	}
	if err := r.step("controller", func() (string, error) { return waitController(ctx, c, o.Namespace, guard("controller-manager")) }); err != nil {
		return inst, err
	}
	if err := r.step("daemons", func() (string, error) { return waitDaemons(ctx, c, o.Namespace, guard("chaos-daemon")) }); err != nil {
		return inst, err
	}
	if err := r.step("webhook", func() (string, error) { return waitWebhook(ctx, c, o.Namespace) }); err != nil {
		return inst, err
	}
	inst.Duration = time.Since(start)
	r.printf("installed Chaos Mesh in %s in %s", o.Namespace, inst.Duration.Round(time.Millisecond))
	return inst, nil
}

// clientConfig copies cfg with client-side rate limits fit for applying a
// few dozen objects (client-go's defaults, 5 QPS, would make a no-op
// rerun take seconds).
func clientConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return cfg
}

// Scheme knows the built-in kinds and Chaos Mesh's.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := chaosv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// run prints and records timed steps.
type run struct {
	log   io.Writer
	steps *[]Step
}

func (r *run) step(name string, f func() (string, error)) error {
	start := time.Now()
	msg, err := f()
	d := time.Since(start)
	*r.steps = append(*r.steps, Step{Name: name, Duration: d})
	if err != nil {
		r.printf("%s: failed after %s: %v", name, d.Round(time.Millisecond), err)
		return fmt.Errorf("%s: %w", name, err)
	}
	r.printf("%s: %s in %s", name, msg, d.Round(time.Millisecond))
	return nil
}

func (r *run) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.log, "%s chaos-mesh: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// objectKey names an object in messages: kind/namespace/name.
func objectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}
