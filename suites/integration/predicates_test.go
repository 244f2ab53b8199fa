package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// TestPredicatesMeasured runs three copies of the controller side by side,
// each on its own cluster and differing only in the predicate on owned
// StatefulSets, then makes K status-only updates to each StatefulSet, r of
// which change a readiness field. Reconciles are read from
// controller_runtime_reconcile_total on the manager's metrics endpoint.
// Expected: no predicate reconciles K times; GenerationChangedPredicate 0
// times and leaves status stale; ours r times with correct status.
func TestPredicatesMeasured(t *testing.T) {
	const K, r = 12, 4
	g := NewWithT(t)
	ctx := t.Context()
	variants := predicateVariants(K, r)
	mgr, clusters := newVariantManager(t, variants)
	stop, err := env.StartManager(ctx, mgr)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(stop()).To(Succeed()) }()
	// Only these controllers serve these clusters: delete them (through the
	// finalizer) before the controllers stop.
	defer func() {
		for _, c := range clusters {
			sim.Resume(c.Namespace)
			framework.DeleteAllAndWait(t, env.Client, c.Namespace, &dbv1.DatabaseCluster{}, &dbv1.DatabaseClusterList{})
		}
	}()

	for _, c := range clusters {
		create(t, c)
	}
	waitVariantsCreated(t, variants, clusters)
	// Already during creation, the generation-only controller missed the
	// pods becoming ready.
	stale := clusters["pred-generation"]
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stale), stale)).To(Succeed())
	t.Logf("after creation, pred-generation sees readyReplicas=%d while its StatefulSet has 3", stale.Status.ReadyReplicas)
	g.Expect(stale.Status.ReadyReplicas).To(BeZero())
	// The simulator must not write these StatefulSets during the experiment.
	for _, c := range clusters {
		sim.Pause(c.Namespace)
		t.Cleanup(func() { sim.Resume(c.Namespace) })
	}

	reconciles := reconcileCounts(variants)
	// Let the start-up reconciles drain: the no-predicate count stops moving.
	base := settleCounts(t, reconciles)

	// K updates: every third changes readyReplicas (down, then back), the
	// rest only a condition message that no controller reads.
	readinessChanges := 0
	for i := 1; i <= K; i++ {
		changeReadiness := i%3 == 0 && readinessChanges < r
		for _, v := range variants {
			updateStatefulSetStatus(ctx, g, clusters[v.name], i, changeReadiness)
		}
		if changeReadiness {
			readinessChanges++
		}
		// The unfiltered controller sees every update: wait for it, so that
		// updates are not coalesced in the workqueue.
		waitCount(t, reconciles, "pred-none", base["pred-none"]+float64(i))
		waitCount(t, reconciles, "pred-readiness", base["pred-readiness"]+float64(readinessChanges))
	}
	g.Expect(readinessChanges).To(Equal(r))
	final := settleCounts(t, reconciles)

	// expectReconciles reads every cluster again, stale (pred-generation's)
	// included.
	expectReconciles(t, variants, clusters, base, final)
	g.Expect(stale.Status.ReadyReplicas).NotTo(Equal(int32(3)), "pred-generation's status is stale, as expected")
}

// predicateVariant is one controller of TestPredicatesMeasured: its
// predicate on owned StatefulSets, the reconciles it should make, and
// whether its status should follow the StatefulSet.
type predicateVariant struct {
	name      string
	predicate predicate.Predicate
	want      int
	wantFresh bool
}

// predicateVariants: of K status-only updates, r of which change
// readiness, no predicate reconciles K times; GenerationChangedPredicate 0
// times and leaves status stale; ours r times with correct status.
func predicateVariants(K, r int) []predicateVariant {
	return []predicateVariant{
		{"pred-none", predicate.Funcs{}, K, true},
		{"pred-generation", predicate.GenerationChangedPredicate{}, 0, false},
		{"pred-readiness", operator.StatefulSetReadinessChanged(), r, true},
	}
}

// newVariantManager makes a second manager running one controller per
// variant, each filtered to a namespace of its own, and returns it with
// each variant's cluster (not created yet).
func newVariantManager(t *testing.T, variants []predicateVariant) (ctrl.Manager, map[string]*dbv1.DatabaseCluster) {
	t.Helper()
	g := NewWithT(t)
	opts, _, err := env.ManagerOptions()
	g.Expect(err).NotTo(HaveOccurred())
	opts.Metrics.BindAddress = "0" // counted on the suite manager's endpoint (one registry)
	opts.WebhookServer = nil
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(env.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())

	clusters := map[string]*dbv1.DatabaseCluster{}
	for _, v := range variants {
		ns := newNamespace(t, experimentPrefix+v.name+"-")
		r := &operator.Reconciler{Client: mgr.GetClient(), Snapshotter: snapshots}
		inNS := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })
		g.Expect(r.SetupWithManager(mgr, operator.SetupOptions{Name: v.name, StatefulSetPredicate: v.predicate, Filter: inNS})).To(Succeed())
		clusters[v.name] = reference.NewCluster(ns, "db").WithoutUID().Build()
	}
	return mgr, clusters
}

// waitVariantsCreated waits until every variant's StatefulSet has 3 ready
// replicas and, for the variants whose status follows it, the cluster is
// Available with 3 ready.
func waitVariantsCreated(t *testing.T, variants []predicateVariant, clusters map[string]*dbv1.DatabaseCluster) {
	t.Helper()
	for _, v := range variants {
		c := clusters[v.name]
		waitForStatefulSetReady(t, c)
		if v.wantFresh {
			waitForCluster(t, c, "converged with 3 ready", func(c *dbv1.DatabaseCluster) bool {
				ok, _ := framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy).Match(c)
				return ok && c.Status.ReadyReplicas == 3
			})
		}
	}
}

// reconcileCounts reads each variant's controller_runtime_reconcile_total
// from the suite manager's metrics endpoint.
func reconcileCounts(variants []predicateVariant) func(context.Context) (map[string]float64, error) {
	return func(ctx context.Context) (map[string]float64, error) {
		families, err := framework.Scrape(ctx, metricsURL)
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, v := range variants {
			out[v.name] = framework.SumSamples(families, "controller_runtime_reconcile_total", map[string]string{"controller": v.name})
		}
		return out, nil
	}
}

// updateStatefulSetStatus makes update number tick to the status of c's
// StatefulSet: with changeReadiness it moves readyReplicas (3 to 2, or
// back), else it only changes a condition's message.
func updateStatefulSetStatus(ctx context.Context, g Gomega, c *dbv1.DatabaseCluster, tick int, changeReadiness bool) {
	sts := &appsv1.StatefulSet{}
	key := client.ObjectKey{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}
	g.Expect(env.Client.Get(ctx, key, sts)).To(Succeed())
	if changeReadiness {
		if sts.Status.ReadyReplicas == 3 {
			sts.Status.ReadyReplicas, sts.Status.AvailableReplicas = 2, 2
		} else {
			sts.Status.ReadyReplicas, sts.Status.AvailableReplicas = 3, 3
		}
	} else {
		sts.Status.Conditions = []appsv1.StatefulSetCondition{{Type: "Gauntlet", Status: "True", Message: fmt.Sprintf("tick %d", tick)}}
	}
	g.Expect(env.Client.Status().Update(ctx, sts)).To(Succeed())
}

// expectReconciles reads every cluster and its StatefulSet again, logs a
// table of what each variant did, and expects each variant's reconciles
// (final minus base) and, where it should, status following the
// StatefulSet.
func expectReconciles(t *testing.T, variants []predicateVariant, clusters map[string]*dbv1.DatabaseCluster, base, final map[string]float64) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-16s %10s %10s %22s %s\n", "predicate", "reconciles", "expected", "status.readyReplicas", "StatefulSet readyReplicas")
	for _, v := range variants {
		c := clusters[v.name]
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		sts := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}, sts)).To(Succeed())
		got := final[v.name] - base[v.name]
		fmt.Fprintf(&table, "%-16s %10.0f %10d %22d %d\n", v.name, got, v.want, c.Status.ReadyReplicas, sts.Status.ReadyReplicas)
		g.Expect(got).To(BeEquivalentTo(v.want), "%s reconciles", v.name)
		if v.wantFresh {
			g.Expect(c.Status.ReadyReplicas).To(Equal(sts.Status.ReadyReplicas), "%s: status must follow the StatefulSet", v.name)
		}
	}
	t.Log(table.String())
}

func waitForStatefulSetReady(t *testing.T, c *dbv1.DatabaseCluster) {
	t.Helper()
	key := client.ObjectKey{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}
	err := framework.PollFor(t.Context(), key.String()+" to have 3 ready replicas", convergeTimeout, pollInterval,
		func(ctx context.Context) (bool, string, error) {
			sts := &appsv1.StatefulSet{}
			if err := env.Client.Get(ctx, key, sts); err != nil {
				return false, err.Error(), nil
			}
			return sts.Status.ReadyReplicas == 3, fmt.Sprintf("status %+v", sts.Status), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func waitCount(t *testing.T, read func(context.Context) (map[string]float64, error), name string, want float64) {
	t.Helper()
	err := framework.PollFor(t.Context(), fmt.Sprintf("%s to reach %.0f reconciles", name, want), convergeTimeout, pollInterval,
		func(ctx context.Context) (bool, string, error) {
			counts, err := read(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			return counts[name] >= want, fmt.Sprint(counts), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// settleCounts waits until the counts stop moving for a few scrapes.
func settleCounts(t *testing.T, read func(context.Context) (map[string]float64, error)) map[string]float64 {
	t.Helper()
	var last map[string]float64
	stable := 0
	err := framework.PollFor(t.Context(), "reconcile counts to settle", convergeTimeout, 4*pollInterval, func(ctx context.Context) (bool, string, error) {
		counts, err := read(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if fmt.Sprint(counts) == fmt.Sprint(last) {
			stable++
		} else {
			stable = 0
		}
		last = counts
		return stable >= 3, fmt.Sprint(counts), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}
