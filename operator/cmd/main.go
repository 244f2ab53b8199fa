// Command manager runs the reference DatabaseCluster operator.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
	"github.com/gauntlet-dev/gauntlet/operator/internal/controller"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/snapshot"
	"github.com/gauntlet-dev/gauntlet/operator/internal/storageversion"
	dbwebhook "github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

type options struct {
	kubeconfig              string
	metricsAddr             string
	metricsSecure           bool
	probeAddr               string
	pprofAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	maxConcurrentReconciles int
	clusterDomain           string
	memberAPI               bool
	backupImage             string
	qps                     float64
	burst                   int
	webhooks                webhookOptions
	zap                     zap.Options
}

// webhookOptions configure the validating and conversion webhooks and their
// self-managed certificate (no cert-manager: the operator creates, rotates
// and injects it).
type webhookOptions struct {
	enabled           bool
	port              int
	certDir           string
	serviceName       string
	secretName        string
	configurationName string
	crdName           string
	namespace         string
}

func parseFlags(args []string) (options, error) {
	o := options{zap: zap.Options{Development: false}}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG, then the in-cluster config.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve the metrics over HTTPS (a self-signed certificate) to callers the API server authenticates (TokenReview) and authorizes to get the path (SubjectAccessReview), as kubebuilder scaffolds; false serves plain HTTP to anyone.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address Go's /debug/pprof endpoints bind to (for profiling, as the scale benchmark does); empty or \"0\" serves none.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica of the manager reconciles at a time.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease; defaults to the manager's namespace.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 1, "How many DatabaseClusters are reconciled in parallel (1..64).")
	fs.StringVar(&o.clusterDomain, "cluster-domain", builders.DefaultClusterDomain, "DNS suffix of Services in this cluster, used in member peer and client URLs.")
	fs.Float64Var(&o.qps, "kube-api-qps", -1, "Sustained queries per second to the API server; -1 (the default, as controller-runtime's) turns client-side rate limiting off and leaves the API server's priority and fairness to queue the operator's requests.")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "Burst of queries to the API server, when --kube-api-qps is positive.")
	fs.StringVar(&o.backupImage, "backup-image", "", "Image the backup Jobs run (it must hold /backup); empty uses the manager's own image, read from its pod (POD_NAME, POD_NAMESPACE).")
	fs.BoolVar(&o.memberAPI, "etcd-member-api", true, "Read member health from etcd's own API; false infers it from pod readiness alone (for simulated pods, as in the envtest benchmark).")
	fs.BoolVar(&o.webhooks.enabled, "enable-webhooks", true, "Serve the validating webhook (with a self-managed certificate).")
	fs.IntVar(&o.webhooks.port, "webhook-port", 9443, "Port the webhook server listens on.")
	fs.StringVar(&o.webhooks.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Writable directory where the webhook's tls.crt and tls.key are kept.")
	fs.StringVar(&o.webhooks.serviceName, "webhook-service-name", "gauntlet-webhook-service", "Service that fronts the webhook server; the certificate is issued for its DNS names.")
	fs.StringVar(&o.webhooks.secretName, "webhook-secret-name", "gauntlet-webhook-server-cert", "Secret holding the webhook's CA and certificate, shared by every replica.")
	fs.StringVar(&o.webhooks.configurationName, "webhook-configuration-name", "gauntlet-validating-webhook-configuration", "ValidatingWebhookConfiguration whose caBundle the operator keeps current.")
	fs.StringVar(&o.webhooks.crdName, "conversion-crd-name", "databaseclusters.database.gauntlet.dev", "CustomResourceDefinition whose conversion webhook caBundle the operator keeps current; empty leaves it alone.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.webhooks.namespace = os.Getenv("POD_NAMESPACE")
	if o.webhooks.enabled && o.webhooks.namespace == "" {
		return o, fmt.Errorf("POD_NAMESPACE must be set (from the downward API) when webhooks are enabled; pass --enable-webhooks=false to run without them")
	}
	if o.webhooks.port < 1 || o.webhooks.port > 65535 {
		return o, fmt.Errorf("--webhook-port must be between 1 and 65535, got %d", o.webhooks.port)
	}
	if o.maxConcurrentReconciles < 1 || o.maxConcurrentReconciles > 64 {
		return o, fmt.Errorf("--max-concurrent-reconciles must be between 1 and 64, got %d", o.maxConcurrentReconciles)
	}
	if (o.qps <= 0 && o.qps != -1) || o.burst < 1 {
		return o, fmt.Errorf("--kube-api-qps must be positive, or -1 for no client-side limit, and --kube-api-burst at least 1, got %v and %d", o.qps, o.burst)
	}
	if o.clusterDomain == "" {
		return o, fmt.Errorf("--cluster-domain must not be empty")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "manager exited")
		os.Exit(1)
	}
}

func run(o options) error {
	ctx := ctrl.SetupSignalHandler()
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	mgr, err := newManager(cfg, scheme, o)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := setupController(ctx, mgr, cfg, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if o.webhooks.enabled {
		if err := setupWebhooks(ctx, mgr, cfg, scheme, o.webhooks); err != nil {
			return err
		}
	}
	ctrl.Log.Info("starting manager", "maxConcurrentReconciles", o.maxConcurrentReconciles, "leaderElect", o.leaderElect)
	return mgr.Start(ctx)
}

// newScheme knows the built-in kinds, both DatabaseCluster versions and
// CRDs (the certificate manager patches the conversion webhook's CA).
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, dbv1.AddToScheme, dbv1alpha1.AddToScheme, apiextensionsv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// metricsOptions serve the metrics plain, or, with --metrics-secure, over
// HTTPS to callers allowed to get the path (the RBAC it needs is marked on
// package metrics).
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}

// newManager caches only what the operator manages: member and Job pods,
// members ConfigMaps, snapshot claims, snapshot and restore Jobs, backup
// CronJobs. Pods and Jobs are never applied, so their managed fields (a
// third of a pod's size) are dropped from the cache.
func newManager(cfg *rest.Config, scheme *runtime.Scheme, o options) (ctrl.Manager, error) {
	managed := labels.SelectorFromSet(labels.Set{builders.LabelManagedBy: builders.ManagerName})
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		WebhookServer:           webhook.NewServer(webhook.Options{Port: o.webhooks.port, CertDir: o.webhooks.certDir}),
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "gauntlet-operator.database.gauntlet.dev",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: managed, Transform: cache.TransformStripManagedFields()},
			&corev1.ConfigMap{}:             {Label: managed},
			&corev1.PersistentVolumeClaim{}: {Label: managed},
			&batchv1.Job{}:                  {Label: managed, Transform: cache.TransformStripManagedFields()},
			&batchv1.CronJob{}:              {Label: managed},
		}},
	})
}

// setupController wires the DatabaseCluster reconciler into mgr: its
// snapshotter, etcd dialer and metrics.
func setupController(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, o options) error {
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a clientset for pod logs: %w", err)
	}
	backupImage, err := resolveBackupImage(ctx, clientset, o.backupImage)
	if err != nil {
		return err
	}
	r := &controller.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Events:    mgr.GetEventRecorder(controller.FieldOwner),
		Metrics:   metrics.NewRecorder(ctrlmetrics.Registry),
		Builders:  builders.Options{ClusterDomain: o.clusterDomain, BackupImage: backupImage},
	}
	r.Snapshotter = &snapshot.Job{Client: mgr.GetClient(), Logs: snapshot.PodLogs{Clientset: clientset}, Builders: r.Builders}
	if o.memberAPI {
		r.Dialer = etcd.NewDialer(etcd.DialerOptions{})
	}
	if err := r.SetupWithManager(mgr, controller.SetupOptions{MaxConcurrentReconciles: o.maxConcurrentReconciles}); err != nil {
		return fmt.Errorf("setting up the DatabaseCluster controller: %w", err)
	}
	return nil
}

// resolveBackupImage returns the image backup Jobs run: the flag's, or the
// manager's own (the backup program ships in the operator's image), read
// from the manager's pod. Outside a pod, without the flag, backups cannot
// run; the operator says so on any cluster that asks for them.
func resolveBackupImage(ctx context.Context, cs kubernetes.Interface, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		ctrl.Log.Info("no --backup-image and not in a pod (POD_NAME, POD_NAMESPACE unset): scheduled backups are off")
		return "", nil
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the manager's own pod %s/%s for the backup image (or pass --backup-image): %w", ns, name, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == managerContainer {
			ctrl.Log.Info("backup image", "image", c.Image)
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("the manager's pod %s/%s has no container named %q to take the backup image from; pass --backup-image", ns, name, managerContainer)
}

// managerContainer is the manager's container in its Deployment.
const managerContainer = "manager"

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func conversionCRDs(name string) []string {
	if name == "" {
		return nil
	}
	return []string{name}
}

// setupWebhooks obtains the webhook certificate before the webhook server
// starts (it needs the files), keeps it rotated, and serves the validator.
func setupWebhooks(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, scheme *runtime.Scheme, o webhookOptions) error {
	// A direct client: the certificate code must not cache every Secret.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	cm, err := certs.New(direct, certs.Options{
		Namespace:             o.namespace,
		SecretName:            o.secretName,
		ServiceName:           o.serviceName,
		CertDir:               o.certDir,
		WebhookConfigurations: []string{o.configurationName},
		ConversionCRDs:        conversionCRDs(o.crdName),
	})
	if err != nil {
		return fmt.Errorf("webhook certificates: %w", err)
	}
	start := time.Now()
	if err := cm.Ensure(ctx); err != nil {
		return fmt.Errorf("webhook certificates: %w", err)
	}
	ctrl.Log.Info("webhook certificate ready", "secret", o.secretName, "took", time.Since(start).Round(time.Millisecond))
	if err := mgr.Add(cm); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook-certs", cm.Checker); err != nil {
		return err
	}
	// Not ready until the webhook server serves: an API server that calls a
	// pod which is Ready but not yet listening fails every DatabaseCluster
	// write (seen on kind by the e2e tier).
	if err := mgr.AddReadyzCheck("webhook-server", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if err := dbwebhook.SetupWithManager(mgr); err != nil {
		return err
	}
	if o.crdName == "" {
		return nil
	}
	// With the conversion webhook serving, objects stored in an older
	// version are rewritten in the storage version, once, by the leader.
	return mgr.Add(&storageversion.Migrator{Client: direct, CRD: o.crdName})
}
