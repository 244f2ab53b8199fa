package reference

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	// A scheme with only the kinds involved: the fake client's tracker
	// walks the whole scheme on every write, so a small one is much faster.
	scheme := runtime.NewScheme()
	if err := errors.Join(corev1.AddToScheme(scheme), appsv1.AddToScheme(scheme),
		policyv1.AddToScheme(scheme), batchv1.AddToScheme(scheme), dbv1.AddToScheme(scheme)); err != nil {
		panic(err) // static registrations; cannot fail
	}
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
		replacing: map[string]uint64{}, midChangeFailures: o.MidChangeFailures,
	}
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
			r := &operator.Reconciler{Client: cl, Dialer: sw.etcd.Dialer(), Snapshotter: sw.snapshots, Clock: sw.clock,
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

// perturbations are what the world does to the cluster. Without membership
// changes (no member API, where the operator cannot change the membership,
// or a cluster of 1 or 2, which is not scaled) no scale arrives and no
// volume is lost (its member could not be replaced).
func (sw *simWorld) perturbations(membershipChanges bool) []sim.Perturbation {
	all := []sim.Perturbation{
		// 3 or 5 members, both ways. Smaller clusters tolerate no member
		// down, so the operator pauses an upgrade there and the end state
		// depends on whether the roll finished before the scale-down: the
		// differential oracle would flag the timing, not a bug. The unit
		// tier replays 3→5→3→1→3 step by step instead.
		{Name: "scale", Apply: func(ctx context.Context, choice uint64) (string, error) {
			return sw.changeSpec(ctx, choice, func(s *dbv1.DatabaseClusterSpec) {
				to := int32(3 + 2*(choice%2))
				s.Replicas = &to
			})
		}},
		{Name: "image", Apply: func(ctx context.Context, choice uint64) (string, error) {
			return sw.changeSpec(ctx, choice, func(s *dbv1.DatabaseClusterSpec) { s.Image = simImages[choice%uint64(len(simImages))] })
		}},
		{Name: "pod-unready", Apply: func(ctx context.Context, choice uint64) (string, error) {
			pod := fmt.Sprintf("db-%d", choice%sw.members())
			if err := sw.noteFailure(ctx, pod); err != nil {
				return "", err
			}
			sw.sts.SetReady(false, simNamespace, pod)
			return pod + " fails its readiness probe", nil
		}},
		{Name: "member-fails", Apply: func(ctx context.Context, choice uint64) (string, error) {
			name := fmt.Sprintf("db-%d", choice%sw.members())
			if err := sw.noteFailure(ctx, name); err != nil {
				return "", err
			}
			// etcd's /readyz fails with the member, and with it the pod's
			// readiness probe.
			sw.processes.Fail(name, true)
			sw.sts.SetReady(false, simNamespace, name)
			return "etcd reports " + name + " unhealthy; its readiness probe fails", nil
		}},
		{Name: "pod-deleted", Apply: func(ctx context.Context, choice uint64) (string, error) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: fmt.Sprintf("db-%d", choice%sw.members())}}
			if err := sw.noteFailure(ctx, pod.Name); err != nil {
				return "", err
			}
			if err := sw.w.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return "", err
			}
			return pod.Name + " deleted", nil
		}},
		// One volume at a time, from a healthy cluster of three or more:
		// losing a majority's data is a disaster to restore from a
		// snapshot, not something an operator may repair on its own.
		{Name: "volume-lost", Apply: func(ctx context.Context, choice uint64) (string, error) {
			name := fmt.Sprintf("db-%d", choice%sw.members())
			pods, err := sw.pods(ctx)
			if err != nil {
				return "", err
			}
			running := map[string]bool{}
			for _, p := range pods {
				running[p.Name] = p.DeletionTimestamp.IsZero() && framework.PodReady(&p) && sw.processes.Probe(&p)
			}
			voters, id := 0, uint64(0)
			for _, m := range sw.etcd.Members() {
				if m.Name == name {
					id = m.ID
				}
				if m.IsLearner || !m.Healthy || !running[m.Name] {
					return "no-op: a member is not healthy", nil
				}
				if err := sw.w.Client.Get(ctx, client.ObjectKey{Namespace: simNamespace, Name: "data-" + m.Name}, &corev1.PersistentVolumeClaim{}); err != nil {
					return "no-op: a member has no volume", client.IgnoreNotFound(err)
				}
				voters++
			}
			if voters < 3 {
				return "no-op: fewer than 3 healthy voters", nil
			}
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: "data-" + name}}
			if err := sw.w.Client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
				return "", err
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: name}}
			if err := sw.w.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return "", err
			}
			sw.replacing[name] = id
			return sw.armWithChange(choice, name+" lost its volume and was deleted"), nil
		}},
		sw.midChangePerturbation(),
		{Name: "delete-cluster", Apply: func(ctx context.Context, choice uint64) (string, error) {
			// Rare: only one choice in four deletes, so most runs keep a cluster.
			if sw.deleted || choice%4 != 0 {
				return "no-op", nil
			}
			c, err := sw.cluster(ctx)
			if err != nil {
				return "", err
			}
			if err := sw.w.Client.Delete(ctx, c); err != nil {
				return "", err
			}
			sw.deleted = true
			return "the user deletes the cluster", nil
		}},
	}
	if !membershipChanges {
		all = slices.DeleteFunc(all, func(p sim.Perturbation) bool { return p.Name == "scale" || p.Name == "volume-lost" })
	}
	return all
}

// members is how many members the perturbations pick from: the ordinals
// every size the run may have shares.
func (sw *simWorld) members() uint64 {
	if n := *sw.intent.Replicas; n < 3 {
		return uint64(n)
	}
	return 3
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

func (sw *simWorld) readyPods(ctx context.Context) (int, error) {
	pods, err := sw.pods(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		// Readiness as the kubelet reports it: a failed member's pod stays
		// Ready until its probe fails, which is all an operator can know.
		if p.DeletionTimestamp.IsZero() && framework.PodReady(&p) {
			n++
		}
	}
	return n, nil
}

func (sw *simWorld) invariants() []sim.Invariant {
	return []sim.Invariant{
		{Name: "every child has a controller owner reference", Kind: sim.Safety, Check: sw.checkOwners},
		{Name: "the finalizer goes only after a final snapshot is recorded", Kind: sim.Safety, Check: sw.checkSnapshotBeforeFinalizer},
		{Name: "operator actions never take ready members below quorum", Kind: sim.Safety, Check: sw.checkQuorumKept},
		{Name: "at most one membership change in flight", Kind: sim.Safety, Check: sw.checkOneMembershipChange},
		{Name: "a leader is never removed before handing over", Kind: sim.Safety, Check: sw.checkLeaderHandedOver},
		{Name: "the operator asks etcd for no membership change that breaks quorum", Kind: sim.Safety, Check: sw.checkNoRefusedChange},
		{Name: "the user's spec is never overwritten", Kind: sim.Safety, Check: sw.checkIntentKept},
		{Name: "Available only when a quorum is ready", Kind: sim.Honesty, Check: sw.checkAvailableHonest},
		{Name: "Reconciled only when the StatefulSet matches the spec", Kind: sim.Honesty, Check: sw.checkReconciledHonest},
	}
}

func (sw *simWorld) checkOwners(ctx context.Context, _ sim.StepInfo) error {
	for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}, &corev1.ConfigMapList{}} {
		if err := sw.w.Client.List(ctx, list, client.InNamespace(simNamespace)); err != nil {
			return err
		}
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			obj := it.(client.Object)
			ref := metav1.GetControllerOf(obj)
			if ref == nil || ref.Kind != "DatabaseCluster" || ref.Name != sw.key.Name {
				return fmt.Errorf("%T %s has no controller reference to DatabaseCluster %s (owners %v)", obj, obj.GetName(), sw.key.Name, obj.GetOwnerReferences())
			}
		}
	}
	return nil
}

func (sw *simWorld) checkSnapshotBeforeFinalizer(_ context.Context, s sim.StepInfo) error {
	for _, obj := range s.Deleted {
		c, ok := obj.(*dbv1.DatabaseCluster)
		// A cluster deleted before the operator added its finalizer never
		// had children, so never held data.
		if !ok || c.Spec.DeletionPolicy == dbv1.DeletionPolicyDelete || !slices.Contains(c.Finalizers, dbv1.Finalizer) {
			continue
		}
		snap := c.Status.LastSnapshot
		if snap == nil || !snap.Final {
			return fmt.Errorf("DatabaseCluster %s was removed without a final snapshot recorded after deletion began (lastSnapshot %+v)", c.Name, snap)
		}
	}
	return nil
}

func (sw *simWorld) checkQuorumKept(ctx context.Context, s sim.StepInfo) error {
	ready, err := sw.readyPods(ctx)
	if err != nil {
		return err
	}
	defer func() { sw.readyBefore = ready }()
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) || sw.deleted {
		return nil
	}
	if err != nil {
		return err
	}
	q := sw.quorum(c)
	if s.ByOperator && ready < q && sw.readyBefore >= q && ready < sw.readyBefore {
		return fmt.Errorf("a reconcile took ready members from %d to %d, below the quorum of %d", sw.readyBefore, ready, q)
	}
	// In etcd's own eyes too: a membership change must not leave fewer
	// healthy voters than a quorum of the voters it leaves.
	voters, healthy := 0, 0
	for _, m := range sw.etcd.Members() {
		if !m.IsLearner {
			voters++
			if m.Healthy {
				healthy++
			}
		}
	}
	now := voters > 0 && healthy >= operator.Quorum(voters)
	defer func() { sw.quorumBefore = now }()
	if s.ByOperator && sw.quorumBefore && !now {
		return fmt.Errorf("a reconcile left etcd with %d healthy of %d voters, below the quorum of %d", healthy, voters, operator.Quorum(voters))
	}
	return nil
}

// quorum is the majority of etcd's voting members (of the spec's size before
// the cluster has formed).
func (sw *simWorld) quorum(c *dbv1.DatabaseCluster) int {
	voters := 0
	for _, m := range sw.etcd.Members() {
		if !m.IsLearner {
			voters++
		}
	}
	if voters == 0 {
		voters = int(c.DesiredReplicas())
	}
	return operator.Quorum(voters)
}

// checkLeaderHandedOver: the operator moves leadership off a member before
// removing it, whenever another healthy voter can take over (the fake etcd
// records every removal of a leader).
func (sw *simWorld) checkLeaderHandedOver(context.Context, sim.StepInfo) error {
	if removed := sw.etcd.LeaderRemovals(); len(removed) > 0 {
		return fmt.Errorf("member(s) %v removed while leading, though another healthy voter could have taken over", removed)
	}
	return nil
}

// checkNoRefusedChange: etcd refuses a change that would break quorum, but
// safety must not rest on that: the operator's own gate must never ask.
func (sw *simWorld) checkNoRefusedChange(context.Context, sim.StepInfo) error {
	if refused := sw.etcd.Refusals(); len(refused) > 0 {
		return fmt.Errorf("etcd refused %d membership change(s) the operator asked for; the first: %s", len(refused), refused[0])
	}
	return nil
}

func (sw *simWorld) checkOneMembershipChange(context.Context, sim.StepInfo) error {
	learners := 0
	for _, m := range sw.etcd.Members() {
		if m.IsLearner {
			learners++
		}
	}
	if learners > 1 {
		return fmt.Errorf("%d learners at once", learners)
	}
	return nil
}

func (sw *simWorld) checkIntentKept(ctx context.Context, _ sim.StepInfo) error {
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if *c.Spec.Replicas != *sw.intent.Replicas || c.Spec.Image != sw.intent.Image {
		return fmt.Errorf("spec is replicas=%d image=%s but the user last wrote replicas=%d image=%s",
			*c.Spec.Replicas, c.Spec.Image, *sw.intent.Replicas, sw.intent.Image)
	}
	return nil
}

func (sw *simWorld) checkAvailableHonest(ctx context.Context, s sim.StepInfo) error {
	// Judged right after a reconcile that ran without a fault: one that read
	// a stale view, crashed or failed a call may leave status behind the
	// world, which is expected; a clean pass may not.
	if !s.ByOperator || s.Action.Fault.Kind != sim.NoFault {
		return nil
	}
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(c.Status.Conditions, dbv1.ConditionAvailable) || !c.DeletionTimestamp.IsZero() {
		return nil
	}
	ready, err := sw.readyPods(ctx)
	if err != nil {
		return err
	}
	if q := sw.quorum(c); ready < q {
		return fmt.Errorf("condition Available is True with %d ready members, quorum is %d", ready, q)
	}
	return nil
}

func (sw *simWorld) checkReconciledHonest(ctx context.Context, _ sim.StepInfo) error {
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	prog := meta.FindStatusCondition(c.Status.Conditions, dbv1.ConditionProgressing)
	if c.Status.ObservedGeneration != c.Generation || prog == nil || prog.Reason != dbv1.ReasonReconciled || prog.ObservedGeneration != c.Generation {
		return nil
	}
	sts := &appsv1.StatefulSet{}
	if err := sw.w.Client.Get(ctx, client.ObjectKey{Namespace: simNamespace, Name: operator.StatefulSetName(c)}, sts); err != nil {
		return fmt.Errorf("status says generation %d is reconciled, but the StatefulSet: %w", c.Generation, err)
	}
	if *sts.Spec.Replicas != *c.Spec.Replicas || sts.Spec.Template.Spec.Containers[0].Image != c.Spec.Image {
		return fmt.Errorf("status says generation %d is reconciled, but the StatefulSet has replicas=%d image=%s, spec wants %d %s",
			c.Generation, *sts.Spec.Replicas, sts.Spec.Template.Spec.Containers[0].Image, *c.Spec.Replicas, c.Spec.Image)
	}
	return nil
}

func (sw *simWorld) converged(ctx context.Context) error {
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		if !sw.deleted {
			return errors.New("the DatabaseCluster vanished without being deleted")
		}
		return nil
	}
	if err != nil {
		return err
	}
	if sw.deleted {
		return fmt.Errorf("the DatabaseCluster was deleted but is still there (finalizers %v)\n%s", c.Finalizers, framework.DescribeConditions(c.Status.Conditions))
	}
	var problems []string
	if c.Status.ObservedGeneration != c.Generation {
		problems = append(problems, fmt.Sprintf("observedGeneration %d, generation %d", c.Status.ObservedGeneration, c.Generation))
	}
	pods, err := sw.pods(ctx)
	if err != nil {
		return err
	}
	outdated := 0
	for _, p := range pods {
		if len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image != c.Spec.Image {
			outdated++
		}
	}
	voters, learners := 0, 0
	for _, m := range sw.etcd.Members() {
		if m.IsLearner {
			learners++
		} else {
			voters++
		}
	}
	if voters != int(*c.Spec.Replicas) || learners > 0 {
		problems = append(problems, fmt.Sprintf("etcd has %d voters and %d learners, spec.replicas %d", voters, learners, *c.Spec.Replicas))
	}
	// A cluster of one or two members tolerates no member down: the
	// operator refuses to roll it and says so.
	progressing := framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled)
	switch {
	case outdated > 0 && operator.FaultTolerance(int(*c.Spec.Replicas)) == 0:
		progressing = framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonWaitingForQuorum)
	case outdated > 0:
		problems = append(problems, fmt.Sprintf("%d pods run an image other than %s", outdated, c.Spec.Image))
	}
	for _, m := range []*framework.ConditionMatcher{
		framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy),
		progressing,
		framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy),
	} {
		if ok, _ := m.Match(c); !ok {
			problems = append(problems, "not "+fmt.Sprint(m.FailureMessage(c)))
		}
	}
	if c.Status.ReadyReplicas != *c.Spec.Replicas {
		problems = append(problems, fmt.Sprintf("status.readyReplicas %d, spec.replicas %d", c.Status.ReadyReplicas, *c.Spec.Replicas))
	}
	if len(problems) > 0 {
		return fmt.Errorf("not converged: %v", problems)
	}
	return nil
}
