// Command manager runs the Memcached operator: the reconciler of the
// Memcached kind behind controller-runtime's manager, with its metrics
// (controller-runtime's reconcile counters, which Gauntlet's scenarios
// judge), health probes and leader election.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gauntlet-dev/gauntlet/suites/examples/memcached"
)

func main() {
	var metricsAddr, probeAddr string
	var leaderElect bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus metrics are served on")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address /healthz and /readyz are served on")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, so that only one replica reconciles")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "registering the built-in kinds")
		os.Exit(1)
	}
	if err := memcached.AddToScheme(scheme); err != nil {
		log.Error(err, "registering the Memcached kind")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "memcached.cache.example.com",
		// A stopped manager hands the lease over at once instead of making
		// its successor wait out the lease.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	r := &memcached.Reconciler{Client: mgr.GetClient(), Clock: clock.RealClock{}}
	if err := r.SetupWithManager(mgr); err != nil {
		log.Error(err, "registering the controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding the readiness check")
		os.Exit(1)
	}
	log.Info("starting the manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
