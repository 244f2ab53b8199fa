// Package controller reconciles DatabaseClusters: an etcd cluster run as a
// StatefulSet behind a headless Service, with a client Service and a
// quorum-keeping PodDisruptionBudget, guarded by a finalizer that takes a
// verified final snapshot before anything is deleted.
//
// One file per concern: finalizer.go (add, delete path and final snapshot),
// apply.go (server-side apply of children), services.go, members.go (what
// etcd reports: membership and health), membership.go (the members
// ConfigMap and one quorum-gated membership step per pass, lost-volume
// replacement), restore.go (spec.restoreFrom), statefulset.go, rolling.go
// (upgrades, one member at a time), disruption.go, status.go (conditions,
// computed once per pass), predicates.go (which child updates wake the
// controller).
package controller

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

// FieldOwner is the server-side-apply field manager of every child the
// operator writes.
const FieldOwner = "gauntlet-operator"

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "databasecluster"

// Requeue intervals. The controller never blocks waiting for pods: it returns
// and is woken by its watches, or by these timers for what it cannot watch.
const (
	// HealthCheckInterval re-reads member health from etcd, which no watch reports.
	HealthCheckInterval = 60 * time.Second
	// DegradedFastRecheck re-reads member health while a member has been
	// unhealthy for less than DegradedFastWindow: a member that comes back
	// shows as healthy within a second.
	DegradedFastRecheck = time.Second
	// DegradedFastWindow is how long the fast recheck lasts.
	DegradedFastWindow = time.Minute
	// DegradedRecheckInterval re-reads member health after that, while a
	// member stays unhealthy.
	DegradedRecheckInterval = 10 * time.Second
	// PodCacheLagRecheck looks again when, without etcd's API, the
	// StatefulSet counts more ready pods than the pod cache shows yet.
	PodCacheLagRecheck = time.Second
	// ForeignChildRecheckInterval retries after a user removes a conflicting object.
	ForeignChildRecheckInterval = 2 * time.Minute
	// SnapshotPollInterval checks on a final snapshot that is still in progress.
	SnapshotPollInterval = 5 * time.Second
	// SnapshotRecordedRequeue comes back to release the finalizer once the
	// final snapshot is recorded in status (status writes do not wake the
	// controller).
	SnapshotRecordedRequeue = time.Second
)

// Snapshotter takes the final snapshot of a cluster that is being deleted with
// deletionPolicy Snapshot.
type Snapshotter interface {
	// FinalSnapshot takes, stores and verifies a snapshot of the cluster's
	// data somewhere that outlives the cluster. It returns (nil, nil) while the
	// snapshot is still in progress; the controller then comes back later.
	FinalSnapshot(ctx context.Context, c *dbv1.DatabaseCluster) (*dbv1.SnapshotStatus, error)
}

// Reconciler reconciles DatabaseCluster objects.
type Reconciler struct {
	// Client reads and writes the API. In a manager it is the cached client.
	Client client.Client
	// APIReader reads what the cache does not hold (objects the user names
	// in the spec, such as a restore claim or a StorageClass); nil uses Client.
	APIReader client.Reader
	// Dialer opens etcd's member API. Nil means member health is inferred
	// from pod readiness alone (and said so in the Degraded condition).
	Dialer etcd.Dialer
	// Snapshotter takes final snapshots. Nil makes every Snapshot deletion fail
	// loudly and keep the finalizer: nothing is deleted without a snapshot.
	Snapshotter Snapshotter
	// Events records Kubernetes events (events.k8s.io/v1).
	Events events.EventRecorder
	// Metrics records the operator's own metrics; nil records nothing.
	Metrics *metrics.Recorder
	// Builders holds cluster-wide settings for the desired objects.
	Builders builders.Options
	// Clock stamps condition transitions; nil uses the wall clock.
	Clock clock.PassiveClock

	// applied remembers children found to match what the operator applies.
	applied appliedCache
	// announced remembers the condition statuses events have announced.
	announced announcedConditions
	// written remembers the status last written for each cluster.
	written writtenStatuses
	// validated remembers each cluster's spec validation by generation.
	validated validatedSpecs
}

// +kubebuilder:rbac:groups=database.gauntlet.dev,resources=databaseclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=database.gauntlet.dev,resources=databaseclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=database.gauntlet.dev,resources=databaseclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Reconcile moves one DatabaseCluster toward its spec. It is thin: fetch,
// build a scope, run the phases of the normal or the delete path, and write
// status once, in a defer, from what the phases observed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	start := time.Now()
	defer func() { r.Metrics.ObserveReconcile(outcome(res, retErr), time.Since(start)) }()

	c := &dbv1.DatabaseCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.announced.forget(req.NamespacedName)
			r.written.forget(req.NamespacedName)
			r.validated.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if last := r.written.last(c); last != nil {
		// The cache may not have seen the last status write yet: the pass
		// starts from that status (writtenStatuses).
		c.Status = *last.DeepCopy()
	}
	s := newScope(c)
	defer func() {
		if s.etcd != nil {
			_ = s.etcd.Close()
		}
	}()
	defer func() {
		if err := r.writeStatus(ctx, s, retErr); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !c.DeletionTimestamp.IsZero() {
		return runPhases(ctx, s, r.reconcileDelete)
	}
	return runPhases(ctx, s,
		r.validateSpec,
		r.ensureFinalizer,
		r.reconcileServices,
		r.readMembersConfig,
		r.readMembers,
		r.checkReferences,
		r.reconcileMembership,
		r.restoreMembers,
		r.reconcileStatefulSet,
		r.rollMembers,
		r.reconcileDisruptionBudget,
		r.reconcileBackup,
	)
}

// phase is one step of a pass. A phase that returns an error or a result that
// asks for a requeue ends the pass.
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

func runPhases(ctx context.Context, s *scope, phases ...phase) (ctrl.Result, error) {
	for _, p := range phases {
		res, err := p(ctx, s)
		if err != nil || s.stop {
			return res, err
		}
		s.mergeResult(res)
	}
	return s.result, nil
}

func outcome(res ctrl.Result, err error) string {
	switch {
	case err != nil && errors.Is(err, reconcile.TerminalError(nil)):
		return metrics.OutcomeTerminal
	case err != nil:
		return metrics.OutcomeError
	case !res.IsZero():
		return metrics.OutcomeRequeue
	default:
		return metrics.OutcomeSuccess
	}
}

// SetupOptions tune SetupWithManager; the zero value is the production setup.
type SetupOptions struct {
	// MaxConcurrentReconciles is how many clusters are reconciled at once (1 when zero).
	MaxConcurrentReconciles int
	// Name of the controller in logs and metrics; ControllerName when empty.
	Name string
	// StatefulSetPredicate filters owned StatefulSet events;
	// StatefulSetReadinessChanged when nil. Tests swap it to measure others.
	StatefulSetPredicate predicate.Predicate
	// Filter, when set, must pass for every event of every watch, for
	// example to confine a controller to some namespaces.
	Filter predicate.Predicate
}

// SetupWithManager registers the controller: it watches DatabaseClusters (spec
// changes and deletion), and the children it owns.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, o SetupOptions) error {
	if o.Name == "" {
		o.Name = ControllerName
	}
	if o.StatefulSetPredicate == nil {
		o.StatefulSetPredicate = StatefulSetReadinessChanged()
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 1
	}
	if err := registerIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(o.Name).
		For(&dbv1.DatabaseCluster{}, builder.WithPredicates(ClusterChanged())).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(o.StatefulSetPredicate)).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&batchv1.Job{}).
		Owns(&batchv1.CronJob{}).
		// Backup Jobs belong to the CronJob; their label names the cluster.
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return BackupJobCluster(o)
		})).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles})
	if o.Filter != nil {
		b = b.WithEventFilter(o.Filter)
	}
	return b.Complete(r)
}
