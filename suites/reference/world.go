package reference

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// World is the reference operator on the fake client: the reconciler, the
// simulated StatefulSet controller and kubelets, a scripted etcd whose
// members join as their pods become ready, and a scripted snapshotter.
type World struct {
	// Client is the fake API; the test and the simulators use it directly.
	Client client.WithWatch
	// Faults fail the reconciler's calls (and only the reconciler's).
	Faults *framework.Faults
	// Writes records the reconciler's writes.
	Writes *framework.WriteLog
	// Sim plays the StatefulSet controller and the kubelets.
	Sim *framework.StatefulSetSimulator
	// Etcd is the scripted member API.
	Etcd *operator.FakeEtcd
	// Processes plays the etcd processes in the member pods.
	Processes *EtcdWorld
	// Snapshots is the scripted final-snapshot taker.
	Snapshots *FakeSnapshotter
	// Registry holds the operator's metrics.
	Registry *prometheus.Registry
	// Events records the events the reconciler emits.
	Events *events.FakeRecorder
	// Reconciler under test.
	Reconciler *operator.Reconciler
	// Driver runs passes with the world moving in between.
	Driver *framework.Driver
	// Namespace of the test's objects.
	Namespace string
}

// NewWorld builds a world in namespace "default" holding objs.
func NewWorld(t testing.TB, objs ...client.Object) *World {
	t.Helper()
	scheme, mapper, err := worldScheme()
	if err != nil {
		t.Fatalf("building scheme: %v", err)
	}
	w := &World{
		Faults:    &framework.Faults{},
		Writes:    &framework.WriteLog{},
		Etcd:      operator.NewFakeEtcd(),
		Snapshots: NewFakeSnapshotter(),
		Registry:  prometheus.NewRegistry(),
		Events:    events.NewFakeRecorder(100),
		Namespace: "default",
	}
	w.Client = framework.NewFakeClient(scheme, framework.FakeClientOptions{
		Objects:            objs,
		StatusSubresources: []client.Object{&dbv1.DatabaseCluster{}},
		Indexes:            FieldIndexes(),
		RESTMapper:         mapper,
	})
	w.Processes = &EtcdWorld{Client: w.Client, Etcd: w.Etcd, Namespace: w.Namespace}
	w.Sim = &framework.StatefulSetSimulator{Client: w.Client, Namespace: w.Namespace, Probe: w.Processes.Probe}
	w.Reconciler = &operator.Reconciler{
		Client:      w.Writes.Wrap(w.Faults.Client(w.Client)),
		Dialer:      w.Etcd.Dialer(),
		Snapshotter: w.Snapshots,
		Events:      w.Events,
		Metrics:     operator.NewMetricsRecorder(w.Registry),
		Builders:    operator.BuilderOptions{BackupImage: BackupImage},
	}
	w.Driver = &framework.Driver{
		Reconciler: w.Reconciler,
		Writes:     w.Writes,
		Env:        []framework.EnvStep{w.Sim.Step, w.Processes.Step},
		Client:     w.Client,
		Namespace:  w.Namespace,
		Kinds: []client.ObjectList{
			&dbv1.DatabaseClusterList{}, &appsv1.StatefulSetList{}, &corev1.ServiceList{},
			&policyv1.PodDisruptionBudgetList{}, &corev1.PodList{}, &corev1.ConfigMapList{},
		},
	}
	return w
}

// BackupImage is the image a world's backup CronJobs name; nothing runs it.
const BackupImage = "gauntlet.dev/operator:test"

// worldScheme builds the scheme and its REST mapper once: the mapper walks
// every kind and costs more than the rest of a world.
var worldScheme = func() func() (*runtime.Scheme, meta.RESTMapper, error) {
	build := sync.OnceValues(func() (*runtime.Scheme, error) { return operator.NewScheme() })
	mapper := sync.OnceValue(func() meta.RESTMapper {
		scheme, _ := build()
		return testrestmapper.TestOnlyStaticRESTMapper(scheme)
	})
	return func() (*runtime.Scheme, meta.RESTMapper, error) {
		scheme, err := build()
		if err != nil {
			return nil, nil, err
		}
		return scheme, mapper(), nil
	}
}()

// Request names a cluster for Reconcile.
func Request(c *dbv1.DatabaseCluster) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)}
}

// Get re-reads obj from the fake API.
func (w *World) Get(ctx context.Context, obj client.Object) error {
	return w.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}

// AddFinalizer runs a new cluster's first pass, which adds the finalizer
// and writes nothing else, and fails the test if it does anything more or
// less. Tests of what a pass does to a cluster's children start after it.
func (w *World) AddFinalizer(t testing.TB, c *dbv1.DatabaseCluster) {
	t.Helper()
	mark := w.Writes.Len()
	res, err := w.Reconciler.Reconcile(t.Context(), Request(c))
	if err != nil || !res.IsZero() {
		t.Fatalf("the finalizer pass: result %+v, error %v", res, err)
	}
	want := framework.Write{Verb: "patch", Kind: "DatabaseCluster", Key: client.ObjectKeyFromObject(c)}
	if got := w.Writes.Since(mark); len(got) != 1 || got[0] != want {
		t.Fatalf("the finalizer pass wrote %v; want only %v", got, want)
	}
	if err := w.Get(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Finalizers, dbv1.Finalizer) {
		t.Fatalf("the finalizer pass left finalizers %v", c.Finalizers)
	}
}

// FieldIndexes are the operator's cache indexes, for fake clients and
// simulations that serve it.
func FieldIndexes() []framework.FieldIndex {
	var out []framework.FieldIndex
	for _, ix := range operator.FieldIndexes() {
		out = append(out, framework.FieldIndex{Object: ix.Object, Field: ix.Field, Extract: ix.Extract})
	}
	return out
}
