// Command manager runs the reference DatabaseCluster operator.
package main

import (
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/controller"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

type options struct {
	metricsAddr             string
	probeAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	maxConcurrentReconciles int
	clusterDomain           string
	zap                     zap.Options
}

func parseFlags(args []string) (options, error) {
	o := options{zap: zap.Options{Development: false}}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica of the manager reconciles at a time.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease; defaults to the manager's namespace.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 1, "How many DatabaseClusters are reconciled in parallel (1..64).")
	fs.StringVar(&o.clusterDomain, "cluster-domain", builders.DefaultClusterDomain, "DNS suffix of Services in this cluster, used in member peer and client URLs.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.maxConcurrentReconciles < 1 || o.maxConcurrentReconciles > 64 {
		return o, fmt.Errorf("--max-concurrent-reconciles must be between 1 and 64, got %d", o.maxConcurrentReconciles)
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
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := dbv1.AddToScheme(scheme); err != nil {
		return err
	}

	// Only member pods are cached: the operator has no business with others.
	managed := labels.SelectorFromSet(labels.Set{builders.LabelManagedBy: builders.ManagerName})
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "gauntlet-operator.database.gauntlet.dev",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: managed},
		}},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	// No Snapshotter yet: the Job-based final snapshot comes with the etcd
	// issue. Until then a deletion with deletionPolicy Snapshot keeps its
	// finalizer and says why in Degraded (nothing is deleted unsnapshotted);
	// deletionPolicy Delete works.
	r := &controller.Reconciler{
		Client:   mgr.GetClient(),
		Dialer:   etcd.NewDialer(etcd.DialerOptions{}),
		Events:   mgr.GetEventRecorder(controller.FieldOwner),
		Metrics:  metrics.NewRecorder(ctrlmetrics.Registry),
		Builders: builders.Options{ClusterDomain: o.clusterDomain},
	}
	if err := r.SetupWithManager(mgr, o.maxConcurrentReconciles); err != nil {
		return fmt.Errorf("setting up the DatabaseCluster controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "maxConcurrentReconciles", o.maxConcurrentReconciles, "leaderElect", o.leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}
