// Package integration runs the reference operator's real manager in-process
// against a real kube-apiserver and etcd (envtest): what the fake client cannot
// show — schema and CEL validation, the webhook, the status subresource,
// finalizers, informer caches and metrics — is proven here.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// The suite's shared environment: one API server, one manager.
var (
	env        *framework.Envtest
	sim        *framework.StatefulSetSimulator
	snapshots  *reference.FakeSnapshotter
	metricsURL string
	reconciler *operator.Reconciler
)

// backupImage is what the suite's backup CronJobs name; envtest runs no Jobs.
const backupImage = "gauntlet.dev/operator:integration"

// simInterval is how often the simulated StatefulSet controller and kubelets
// act; envtest runs neither.
const simInterval = 100 * time.Millisecond

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	scheme, err := operator.NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = framework.StartEnvtest(framework.EnvtestOptions{
		Scheme:       scheme,
		CRDPaths:     []string{framework.CRDPath("operator/config/crd/bases")},
		WebhookPaths: []string{framework.CRDPath("operator/config/webhook/manifests.yaml")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	ctx, cancel := context.WithCancel(context.Background()) //nolint:forbidigo // TestMain has no *testing.T; this context spans the package run
	defer cancel()
	mgr, err := setupManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := env.StartManager(ctx, mgr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = stop() }()

	// envtest runs no controllers: the harness plays the StatefulSet
	// controller, the kubelets and the garbage collector.
	sim = &framework.StatefulSetSimulator{Client: env.Client}
	gc := &framework.GarbageCollector{Client: env.Client, Kinds: []client.ObjectList{
		&appsv1.StatefulSetList{}, &corev1.PodList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{},
		&batchv1.CronJobList{},
	}}
	report := func(err error) { fmt.Fprintln(os.Stderr, "environment:", err) }
	go framework.RunEvery(ctx, simInterval, sim.Step, report)
	go framework.RunEvery(ctx, simInterval, gc.Step, report)

	code := m.Run()

	// However the tests went, the operator must never have panicked.
	if !noReconcilePanics(ctx) {
		return 1
	}
	return code
}

// setupManager makes the operator's manager on the envtest API server,
// with the reconciler (its snapshots faked) and the webhook; it sets
// metricsURL, snapshots and reconciler.
func setupManager() (ctrl.Manager, error) {
	opts, url, err := env.ManagerOptions()
	if err != nil {
		return nil, err
	}
	metricsURL = url
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		return nil, err
	}
	snapshots = reference.NewFakeSnapshotter()
	reconciler = &operator.Reconciler{
		Client:      mgr.GetClient(),
		Snapshotter: snapshots,
		Events:      mgr.GetEventRecorder(operator.FieldOwner),
		Metrics:     operator.NewMetricsRecorder(ctrlmetrics.Registry),
		APIReader:   mgr.GetAPIReader(),
		Builders:    operator.BuilderOptions{BackupImage: backupImage},
	}
	if err := reconciler.SetupWithManager(mgr, operator.SetupOptions{MaxConcurrentReconciles: 4, Filter: notExperiment}); err != nil {
		return nil, err
	}
	if err := operator.SetupWebhookWithManager(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// noReconcilePanics scrapes the operator's metrics and says on stderr
// whether controller_runtime_reconcile_panics_total is 0.
func noReconcilePanics(ctx context.Context) bool {
	families, err := framework.Scrape(ctx, metricsURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return false
	}
	if panics := framework.SumSamples(families, "controller_runtime_reconcile_panics_total", nil); panics != 0 {
		fmt.Fprintf(os.Stderr, "FAIL: controller_runtime_reconcile_panics_total is %v, want 0\n", panics)
		return false
	}
	fmt.Fprintln(os.Stderr, "controller_runtime_reconcile_panics_total = 0")
	return true
}

// zapLevel keeps a passing suite quiet (errors only) unless GAUNTLET_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("GAUNTLET_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
