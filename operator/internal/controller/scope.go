package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// scope carries one pass: the object, what the phases observed, and how the
// pass should end. Status is computed from it once, at the end of the pass.
type scope struct {
	cluster        *dbv1.DatabaseCluster
	originalStatus *dbv1.DatabaseClusterStatus
	// finalizerPass is true when the pass only added the finalizer: it
	// observed nothing, so it writes no status.
	finalizerPass bool

	// statefulSet is the StatefulSet as read before this pass applied it (nil
	// when it did not exist); statefulSetChanged is true when this pass
	// applied a change to it.
	statefulSet        *appsv1.StatefulSet
	statefulSetChanged bool
	pods               []corev1.Pod

	// members is the merged view of pods and etcd membership; membersObserved
	// is false when the pass ended before it was read.
	members         []dbv1.MemberStatus
	membersObserved bool
	membersFromAPI  bool
	memberAPIErr    error
	// apiMembers is etcd's member list (when membersFromAPI), foreignMembers
	// those that belong to no pod of this cluster.
	apiMembers     []etcd.Member
	foreignMembers []etcd.Member
	// etcd is the pass's client to the member API (nil without one); the
	// membership step uses it, and Reconcile closes it.
	etcd etcd.Client

	// configState and configMembers are the members ConfigMap as read
	// (empty before it exists); replicas is the StatefulSet size the
	// membership calls for.
	configState   string
	configMembers []string
	replicas      int32
	// bootstrapMembers are the members the cluster starts with, while it
	// has not bootstrapped.
	bootstrapMembers []string

	// progressReason and progressMessage say what membership or rolling step
	// this pass took, or why it waits; empty when it had nothing to do.
	progressReason, progressMessage string

	// Conditions the phases found; each maps to a condition reason.
	invalidSpec error
	// invalidBackup is what breaks a rule under spec.backup: backups wait
	// for a fix, the database itself runs (a rule added in an operator
	// upgrade must not stop an existing cluster being managed).
	invalidBackup error
	foreignChild  error
	snapshotErr   error
	restoreErr    error
	// blocked says what the spec names that does not exist yet, such as a
	// StorageClass or a restore claim; the pass waits for it.
	blocked error

	// result is the merged requeue request of the phases run so far; stop ends
	// the pass after the current phase.
	result ctrl.Result
	stop   bool
}

func newScope(c *dbv1.DatabaseCluster) *scope {
	return &scope{cluster: c, originalStatus: c.Status.DeepCopy()}
}

// mergeResult keeps the soonest requeue asked for by any phase.
func (s *scope) mergeResult(res ctrl.Result) {
	s.result = soonest(s.result, res)
}

func soonest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	default:
		return a
	}
}

// requeueAfter ends the pass and comes back after d.
func (s *scope) requeueAfter(d time.Duration) (ctrl.Result, error) {
	s.stop = true
	return ctrl.Result{RequeueAfter: d}, nil
}
