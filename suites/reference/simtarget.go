package reference

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// SimOptions vary the reference target.
type SimOptions struct {
	// StatefulSetPredicate replaces the operator's predicate on owned
	// StatefulSets, to show what a naive one does; nil keeps the operator's.
	StatefulSetPredicate predicate.Predicate
	// WithoutMemberAPI runs the operator without etcd's member API, so it
	// never polls health on a timer and relies on events alone.
	WithoutMemberAPI bool
	// WithoutBackups leaves spec.backup unset, and with it the backup runs,
	// their perturbation and their invariants.
	WithoutBackups bool
	// Replicas is the cluster's size, 3 when zero. A cluster of 3 or more
	// is scaled between 3 and 5 (from 5 the first scale shrinks it). A
	// cluster of 1 or 2 tolerates no member down: it is not scaled (the
	// webhook would refuse most steps, and a roll the operator must refuse
	// would make the end state depend on timing), so member failures,
	// deleted and unready pods, image changes, backups and deletion reach it.
	Replicas int32
	// MidChangeFailures arms a member failure with every scale, image
	// change and lost volume, which the world fires while the change is in
	// flight: every schedule with a change then combines it with a failure.
	// Without it only the member-fails-mid-change perturbation arms one.
	MidChangeFailures bool
}

// Images the image-change perturbation chooses from.
var simImages = []string{"gauntlet.dev/etcd:v3.6.15", "gauntlet.dev/etcd:v3.6.16"}

// SimTarget is the reference operator under the simulation tier: one
// 3-member cluster, the simulated StatefulSet controller and kubelets, a
// scripted etcd whose members join when their pods are ready, and a
// snapshotter that reports its first call in progress.
func SimTarget(o SimOptions) sim.Target {
	scheme := simScheme()
	stsPredicate := o.StatefulSetPredicate
	if stsPredicate == nil {
		stsPredicate = operator.StatefulSetReadinessChanged()
	}
	return sim.Target{
		Name:               "databasecluster",
		Scheme:             scheme,
		StatusSubresources: []client.Object{&dbv1.DatabaseCluster{}},
		Indexes:            FieldIndexes(),
		Watches: []sim.Watch{
			{Kind: &dbv1.DatabaseCluster{}, Predicate: operator.ClusterChanged()},
			{Kind: &appsv1.StatefulSet{}, Predicate: stsPredicate, Map: sim.OwnedBy("DatabaseCluster")},
			{Kind: &corev1.Service{}, Map: sim.OwnedBy("DatabaseCluster")},
			{Kind: &corev1.ConfigMap{}, Map: sim.OwnedBy("DatabaseCluster")},
			{Kind: &policyv1.PodDisruptionBudget{}, Predicate: predicate.GenerationChangedPredicate{}, Map: sim.OwnedBy("DatabaseCluster")},
			{Kind: &batchv1.CronJob{}, Map: sim.OwnedBy("DatabaseCluster")},
			{Kind: &batchv1.Job{}, Map: operator.BackupJobCluster},
		},
		Setup: func(ctx context.Context, w *sim.World) (*sim.Hooks, error) { return setupSim(ctx, w, o) },
	}
}

// simScheme holds only the kinds the operator and the simulated
// controllers read or write. The fake client's field-managed tracker builds
// a REST mapper over every kind of its scheme on every write, so each kind
// registered costs every write of every schedule.
func simScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	add := func(gv schema.GroupVersion, objs ...runtime.Object) {
		scheme.AddKnownTypes(gv, objs...)
		metav1.AddToGroupVersion(scheme, gv)
	}
	add(corev1.SchemeGroupVersion, &corev1.Pod{}, &corev1.PodList{}, &corev1.Service{}, &corev1.ServiceList{},
		&corev1.ConfigMap{}, &corev1.ConfigMapList{}, &corev1.Secret{}, &corev1.SecretList{},
		&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{}, &corev1.Event{}, &corev1.EventList{})
	add(appsv1.SchemeGroupVersion, &appsv1.StatefulSet{}, &appsv1.StatefulSetList{})
	add(policyv1.SchemeGroupVersion, &policyv1.PodDisruptionBudget{}, &policyv1.PodDisruptionBudgetList{})
	add(batchv1.SchemeGroupVersion, &batchv1.Job{}, &batchv1.JobList{}, &batchv1.CronJob{}, &batchv1.CronJobList{})
	if err := dbv1.AddToScheme(scheme); err != nil {
		panic(err) // a static registration; cannot fail
	}
	return scheme
}

// simWorld is one run's operator-specific state.
type simWorld struct {
	w         *sim.World
	key       client.ObjectKey
	etcd      *operator.FakeEtcd
	processes *EtcdWorld
	snapshots *FakeSnapshotter
	sts       *framework.StatefulSetSimulator
	gc        *framework.GarbageCollector
	clock     *clocktesting.FakeClock
	backups   *simBackups
	// intent is the spec the user last wrote: it must never be lost.
	intent      dbv1.DatabaseClusterSpec
	deleted     bool
	readyBefore int
	// quorumBefore: etcd had a quorum of healthy voters after the last step.
	quorumBefore bool
	// replacing maps the members whose volume was lost to the ID they had,
	// until a new healthy voter holds the name (see inFlight).
	replacing map[string]uint64
	// armed is a member failure waiting for a change in flight;
	// midChangeFailures arms one with every change (SimOptions).
	armed             *armedFailure
	midChangeFailures bool
	// memberAPI: the operator runs with etcd's member API. last is the
	// world after the last checked step, calls the operator's member calls
	// since, current the transition the rule invariants judge (simrules.go).
	memberAPI bool
	last      simState
	calls     []memberCall
	current   *transition
}

const simNamespace = "sim"

func setupSim(ctx context.Context, w *sim.World, o SimOptions) (*sim.Hooks, error) {
	c := NewCluster(simNamespace, "db").Build()
	if o.Replicas > 0 {
		c.Spec.Replicas = new(o.Replicas)
	}
	if !o.WithoutBackups {
		// Backups on a schedule, keeping two and none older than a minute
		// (the newest excepted): the world runs them.
		c.Spec.Backup = &dbv1.BackupSpec{
			Schedule:    "* * * * *",
			Retention:   dbv1.BackupRetention{Count: new(int32(2)), MaxAge: &metav1.Duration{Duration: time.Minute}},
			Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}},
		}
	}
	if err := w.Client.Create(ctx, c); err != nil {
		return nil, err
	}
	sw := &simWorld{
		w: w, key: client.ObjectKeyFromObject(c), etcd: operator.NewFakeEtcd(),
		clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), intent: *c.Spec.DeepCopy(),
		replacing: map[string]uint64{}, midChangeFailures: o.MidChangeFailures, memberAPI: !o.WithoutMemberAPI,
	}
	sw.last = simState{key: sw.key} // nothing but the cluster yet, which the first step reads
	sw.backups = newSimBackups(w, sw.key, sw.clock.Now)
	sw.snapshots = &FakeSnapshotter{now: sw.clock.Now}
	sw.snapshots.InProgressFor(1)
	sw.processes = &EtcdWorld{Client: w.Client, Etcd: sw.etcd, Namespace: simNamespace}
	sw.sts = &framework.StatefulSetSimulator{Client: w.Client, Namespace: simNamespace, Probe: sw.processes.Probe}
	sw.gc = &framework.GarbageCollector{Client: w.Client, Kinds: []client.ObjectList{
		&appsv1.StatefulSetList{}, &corev1.PodList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{},
		&corev1.ConfigMapList{}, &batchv1.CronJobList{},
	}}
	hooks := &sim.Hooks{
		NewReconciler: func(cl client.Client) reconcile.Reconciler {
			dialer := recordingDialer{EtcdDialer: sw.etcd.Dialer(), record: func(c memberCall) { sw.calls = append(sw.calls, c) }}
			r := &operator.Reconciler{Client: cl, Dialer: dialer, Snapshotter: sw.snapshots, Clock: sw.clock,
				Builders: operator.BuilderOptions{BackupImage: BackupImage}}
			if o.WithoutMemberAPI {
				r.Dialer = nil
			}
			return r
		},
		Roots: func(ctx context.Context) ([]reconcile.Request, error) {
			return []reconcile.Request{{NamespacedName: sw.key}}, nil
		},
		World:         []framework.EnvStep{sw.tick, sw.fireArmed, sw.sts.Step, sw.processes.Step, sw.backups.Step, sw.collectGarbage},
		Perturbations: sw.perturbations(!o.WithoutMemberAPI && operator.FaultTolerance(int(*c.Spec.Replicas)) > 0),
		Heal:          sw.heal,
		Invariants:    sw.invariants(),
		Converged:     sw.converged,
		Kinds: []client.ObjectList{
			&dbv1.DatabaseClusterList{}, &appsv1.StatefulSetList{}, &corev1.ServiceList{},
			&policyv1.PodDisruptionBudgetList{}, &corev1.PodList{}, &corev1.ConfigMapList{},
			&batchv1.CronJobList{}, &batchv1.JobList{},
		},
		// etcd assigns member IDs (their order depends on who joined first)
		// and raft elects the leader: both differ between equivalent runs.
		// With OnDelete the StatefulSet controller never completes a
		// rollout, so currentRevision (and currentReplicas) record which
		// revision the first pods ran: history, not state.
		// lastBackup records the last scheduled run, which depends on
		// timing too (the backup invariants judge it).
		VolatileFields: []string{"id", "leader", "currentRevision", "currentReplicas", "lastBackup"},
		// Backup Jobs and their pods are history: how many ran depends on
		// how long the run took.
		History: func(obj client.Object) bool {
			return len(operator.BackupJobCluster(obj)) > 0 || obj.GetLabels()[batchv1.JobNameLabel] != ""
		},
	}
	if !o.WithoutBackups {
		hooks.Perturbations = append(hooks.Perturbations, sw.backups.perturbation())
		hooks.Invariants = append(hooks.Invariants, sw.backups.invariants()...)
	}
	return hooks, nil
}

// collectGarbage runs the garbage collector once the cluster was deleted:
// before that no owner can be missing.
func (sw *simWorld) collectGarbage(ctx context.Context) (bool, error) {
	if !sw.deleted {
		return false, nil
	}
	return sw.gc.Step(ctx)
}

// tick moves the clock on; time passes between world steps.
func (sw *simWorld) tick(context.Context) (bool, error) {
	sw.clock.Step(time.Second)
	return false, nil
}

func (sw *simWorld) cluster(ctx context.Context) (*dbv1.DatabaseCluster, error) {
	c := &dbv1.DatabaseCluster{}
	if err := sw.w.Client.Get(ctx, sw.key, c); err != nil {
		return nil, err
	}
	return c, nil
}

// pods are the member pods (not the backup Jobs' pods).
func (sw *simWorld) pods(ctx context.Context) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	members := operator.SelectorLabels(&dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: sw.key.Name}})
	if err := sw.w.Client.List(ctx, list, client.InNamespace(simNamespace), client.MatchingLabels(members)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// updateSpec is a user's edit: a fresh read, a change, an update (the
// webhook's quorum rule is respected by the caller).
func (sw *simWorld) updateSpec(ctx context.Context, mutate func(*dbv1.DatabaseClusterSpec)) (string, error) {
	if sw.deleted {
		return "cluster already deleted: no-op", nil
	}
	c, err := sw.cluster(ctx)
	if err != nil {
		return "", err
	}
	mutate(&c.Spec)
	c.Generation++ // the fake API does not count generations
	if err := sw.w.Client.Update(ctx, c); err != nil {
		return "", err
	}
	sw.intent = *c.Spec.DeepCopy()
	return fmt.Sprintf("spec now replicas=%d image=%s (generation %d)", *c.Spec.Replicas, c.Spec.Image, c.Generation), nil
}

func (sw *simWorld) heal(context.Context) error {
	for i := range 5 {
		sw.sts.SetReady(true, simNamespace, fmt.Sprintf("db-%d", i))
	}
	sw.processes.HealAll()
	sw.backups.heal()
	sw.armed = nil
	return nil
}
