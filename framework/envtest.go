package framework

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// EnvtestOptions configure StartEnvtest.
type EnvtestOptions struct {
	// Scheme knows every kind the tests use.
	Scheme *runtime.Scheme
	// CRDPaths are directories or files of CRDs to install; a missing path
	// is an error, so a suite never runs against a cluster without its API.
	CRDPaths []string
	// WebhookPaths are directories or files of webhook configurations to
	// install, pointed at the manager's webhook server.
	WebhookPaths []string
	// BinaryAssetsDirectory holds kube-apiserver and etcd; empty uses
	// KUBEBUILDER_ASSETS.
	BinaryAssetsDirectory string
}

// Envtest is a real kube-apiserver and etcd, with a client for the test.
type Envtest struct {
	Env    *envtest.Environment
	Config *rest.Config
	// Client talks to the API server directly (no cache).
	Client client.Client
	Scheme *runtime.Scheme
}

// ErrNoAssets is returned by StartEnvtest when no binaries are configured.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: run the suite through `make test-int`, which builds kube-apiserver and etcd first, or point it at setup-envtest's binaries")

// StartEnvtest starts an API server with the CRDs and webhook configurations
// installed. Call it once per package, from TestMain, and Stop it at the end.
func StartEnvtest(o EnvtestOptions) (*Envtest, error) {
	assets := o.BinaryAssetsDirectory
	if assets == "" {
		assets = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if assets == "" {
		return nil, ErrNoAssets
	}
	env := &envtest.Environment{
		Scheme:                o.Scheme,
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     o.CRDPaths,
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: o.WebhookPaths},
	}
	// envtest's default Service range is a /24: 254 ClusterIPs, too few for
	// scale tests that create a Service or two per object.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest from %s: %w", assets, err)
	}
	// Plenty of room for suites that create many objects at once.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: o.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "envtest: API server %s up in %s (assets %s)\n", cfg.Host, time.Since(start).Round(time.Millisecond), assets)
	return &Envtest{Env: env, Config: cfg, Client: c, Scheme: o.Scheme}, nil
}

// Stop stops the API server and etcd.
func (e *Envtest) Stop() error { return e.Env.Stop() }

// ManagerOptions returns manager options wired to this environment: the
// webhook server on envtest's host, port and certificates, and a metrics
// endpoint on a free loopback port, whose URL is returned.
func (e *Envtest) ManagerOptions() (ctrl.Options, string, error) {
	port, err := FreePort()
	if err != nil {
		return ctrl.Options{}, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	wo := e.Env.WebhookInstallOptions
	return ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: addr},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		}),
	}, "http://" + addr + "/metrics", nil
}

// StartManager runs mgr until the returned stop function is called, and
// waits until its caches are synced and, if the environment has webhooks,
// its webhook server accepts TLS connections.
func (e *Envtest) StartManager(ctx context.Context, mgr manager.Manager) (stop func() error, err error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = func() error {
		cancel()
		return <-done
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		_ = stop()
		return nil, errors.New("manager caches did not sync within 30s")
	}
	if len(e.Env.WebhookInstallOptions.Paths) == 0 {
		return stop, nil
	}
	wo := e.Env.WebhookInstallOptions
	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	err = Poll(syncCtx, "the webhook server to accept TLS connections at "+addr, 50*time.Millisecond, func(context.Context) (bool, string, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe, not a trust decision
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", conn.Close()
	})
	if err != nil {
		_ = stop()
		return nil, err
	}
	return stop, nil
}

// CRDPath resolves a path relative to the module root, found by walking up
// from the working directory to go.mod, so suites in any folder can name
// operator/config/... the same way. An absolute path is taken as it is.
func CRDPath(rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	dir, err := os.Getwd()
	if err != nil {
		return rel
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, rel)
		}
		if filepath.Dir(d) == d {
			return rel
		}
	}
}

// FreePort is a loopback port free at the time of asking, for a server a
// test or the harness starts (a manager's metrics endpoint).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
