package controller

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// observation is what one pass saw, the only input of the conditions.
type observation struct {
	generation int64
	desired    int32
	deleting   bool

	statefulSet        *appsv1.StatefulSet
	statefulSetChanged bool

	membersObserved bool
	members         []dbv1.MemberStatus
	membersFromAPI  bool
	memberAPIErr    error

	invalidSpec  error
	foreignChild error
	snapshotErr  error
	restoreErr   error
	blocked      error
	// lastBackup is the outcome of the last scheduled backup, nil when
	// backups are off.
	lastBackup *dbv1.BackupStatus

	// progressReason and progressMessage: the membership or rolling step
	// the pass took or waits on.
	progressReason, progressMessage string

	// previous conditions, for what a pass did not observe and for telling
	// a cluster that is still being created from one that lost members.
	previous []metav1.Condition
}

func (s *scope) observation() observation {
	return observation{
		generation:         s.cluster.Generation,
		desired:            s.cluster.DesiredReplicas(),
		deleting:           !s.cluster.DeletionTimestamp.IsZero(),
		statefulSet:        s.statefulSet,
		statefulSetChanged: s.statefulSetChanged,
		membersObserved:    s.membersObserved,
		members:            s.members,
		membersFromAPI:     s.membersFromAPI,
		memberAPIErr:       s.memberAPIErr,
		invalidSpec:        s.invalidSpec,
		foreignChild:       s.foreignChild,
		snapshotErr:        s.snapshotErr,
		restoreErr:         s.restoreErr,
		blocked:            s.blocked,
		lastBackup:         lastBackupOf(s.cluster),
		progressReason:     s.progressReason,
		progressMessage:    s.progressMessage,
		previous:           s.originalStatus.Conditions,
	}
}

func lastBackupOf(c *dbv1.DatabaseCluster) *dbv1.BackupStatus {
	if c.Spec.Backup == nil {
		return nil
	}
	return c.Status.LastBackup
}

// quorumView counts voting members and their health.
type quorumView struct {
	voters, healthyVoters, learners, unhealthy int
}

// quorumOf counts the members. With etcd's API (fromAPI), an expected
// member that etcd does not list (no ID: not yet added) is not a voter.
func quorumOf(members []dbv1.MemberStatus, fromAPI bool) quorumView {
	var q quorumView
	for _, m := range members {
		switch {
		case fromAPI && m.ID == "":
			q.unhealthy++
			continue
		case m.Learner:
			q.learners++
		case m.Healthy:
			q.voters++
			q.healthyVoters++
		default:
			q.voters++
		}
		if !m.Healthy {
			q.unhealthy++
		}
	}
	return q
}

func (q quorumView) hasQuorum() bool {
	return q.voters > 0 && q.healthyVoters >= etcd.Quorum(q.voters)
}

// atRisk is true when losing one more healthy voter would lose quorum.
func (q quorumView) atRisk() bool {
	return q.healthyVoters <= etcd.Quorum(q.voters)
}

// wasAvailable tells whether the cluster has been available since it was
// created: until then, missing members are expected, not a degradation.
func (o observation) wasAvailable() bool {
	c := meta.FindStatusCondition(o.previous, dbv1.ConditionAvailable)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == dbv1.ReasonQuorumLost)
}

// availableCondition: True when a quorum of voting members is healthy.
func availableCondition(o observation) metav1.Condition {
	if !o.membersObserved {
		return keepOr(o, dbv1.ConditionAvailable, metav1.ConditionFalse, dbv1.ReasonBootstrapping, "members have not been observed yet")
	}
	q := quorumOf(o.members, o.membersFromAPI)
	msg := fmt.Sprintf("%d of %d voting members healthy, quorum is %d", q.healthyVoters, q.voters, etcd.Quorum(q.voters))
	switch {
	case q.hasQuorum():
		return condition(o, dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy, msg)
	case o.wasAvailable():
		return condition(o, dbv1.ConditionAvailable, metav1.ConditionFalse, dbv1.ReasonQuorumLost, msg)
	default:
		return condition(o, dbv1.ConditionAvailable, metav1.ConditionFalse, dbv1.ReasonBootstrapping, msg)
	}
}

// degradedCondition: True when an expected member is missing or unhealthy,
// or when the operator cannot act (a foreign child, a failed snapshot).
func degradedCondition(o observation, available metav1.Condition) metav1.Condition {
	switch {
	case o.snapshotErr != nil:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonSnapshotFailed, o.snapshotErr.Error())
	case o.foreignChild != nil:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonForeignChild, o.foreignChild.Error())
	case o.restoreErr != nil:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonRestoreFailed, o.restoreErr.Error())
	case !o.membersObserved:
		return keepOr(o, dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonBootstrapping, "members have not been observed yet")
	}
	var bad []string
	for _, m := range o.members {
		if !m.Healthy {
			bad = append(bad, m.Name)
		}
	}
	everAvailable := o.wasAvailable() || available.Status == metav1.ConditionTrue
	switch {
	case len(bad) > 0 && !everAvailable:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonBootstrapping,
			fmt.Sprintf("members starting: %d of %d healthy", len(o.members)-len(bad), len(o.members)))
	case len(bad) > 0:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonMembersUnhealthy,
			fmt.Sprintf("%d of %d members not healthy: %s", len(bad), len(o.members), strings.Join(bad, ", ")))
	case o.memberAPIErr != nil:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonMemberAPIUnreachable,
			"health inferred from pod readiness: "+o.memberAPIErr.Error())
	case o.lastBackup != nil && !o.lastBackup.Succeeded:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonBackupFailed,
			fmt.Sprintf("the last scheduled backup, %s, failed: %s", o.lastBackup.Job, o.lastBackup.Message))
	default:
		return condition(o, dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy,
			fmt.Sprintf("all %s healthy", countMembers(len(o.members))))
	}
}

// progressingCondition: True while the cluster moves toward its spec.
func progressingCondition(o observation, available metav1.Condition) metav1.Condition {
	sts := o.statefulSet
	switch {
	case o.deleting:
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonDeleting, "carrying out the deletion policy")
	case o.invalidSpec != nil:
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonInvalidSpec, o.invalidSpec.Error())
	case o.foreignChild != nil:
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked, o.foreignChild.Error())
	case o.blocked != nil:
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked, o.blocked.Error())
	case !o.membersObserved:
		return keepOr(o, dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonCreating, "creating members")
	case o.progressMessage != "":
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionTrue, o.progressReason, o.progressMessage)
	case sts == nil || (!o.wasAvailable() && available.Status != metav1.ConditionTrue):
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonCreating,
			fmt.Sprintf("creating members: %d of %d healthy", healthyCount(o.members), o.desired))
	case sts.Spec.Replicas != nil && *sts.Spec.Replicas != o.desired,
		sts.Spec.Replicas != nil && sts.Status.Replicas != *sts.Spec.Replicas:
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonScaling,
			fmt.Sprintf("scaling from %d to %d members", sts.Status.Replicas, o.desired))
	// With OnDelete the StatefulSet controller never moves currentRevision:
	// the rollout is done when every pod runs the update revision.
	case o.statefulSetChanged, sts.Status.ObservedGeneration < sts.Generation,
		sts.Status.UpdateRevision != "" && sts.Status.UpdatedReplicas < sts.Status.Replicas:
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonRollingUpdate,
			"the members' pod template changed; members are replaced one at a time, followers first")
	default:
		return condition(o, dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled,
			fmt.Sprintf("%s, as the spec asks", countMembers(int(o.desired))))
	}
}

// computeConditions derives the three conditions from one pass's observation.
func computeConditions(o observation) []metav1.Condition {
	available := availableCondition(o)
	if o.deleting {
		// Health is not observed while deleting; only say what the delete
		// path is doing.
		available = keepOr(o, dbv1.ConditionAvailable, available.Status, available.Reason, available.Message)
	}
	return []metav1.Condition{available, progressingCondition(o, available), degradedCondition(o, available)}
}

func condition(o observation, t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: o.generation}
}

// keepOr keeps the previous condition of this type (a pass that did not
// observe something must not invent it), or sets the given one if none exists.
func keepOr(o observation, t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	if prev := meta.FindStatusCondition(o.previous, t); prev != nil {
		return *prev
	}
	return condition(o, t, s, reason, msg)
}

// writeStatus computes status from the pass's observation and writes it with
// one patch to the status subresource, only when it changed. observedGeneration
// moves only when the pass succeeded: no error, not deleting, not blocked. A
// pass that only added the finalizer writes nothing.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope, passErr error) error {
	if s.finalizerPass {
		return nil
	}
	c := s.cluster
	st := &c.Status
	o := s.observation()
	if sts := s.statefulSet; sts != nil {
		st.Replicas, st.ReadyReplicas = sts.Status.Replicas, sts.Status.ReadyReplicas
	}
	if s.membersObserved {
		st.Members = s.members
		q := quorumOf(s.members, s.membersFromAPI)
		r.Metrics.SetMembers(c.Namespace, c.Name, q.healthyVoters, q.unhealthy, q.learners, q.atRisk())
	}
	now := metav1.NewTime(r.now())
	for _, cond := range computeConditions(o) {
		cond.LastTransitionTime = now // kept by SetStatusCondition unless the status flips
		prev := meta.FindStatusCondition(s.originalStatus.Conditions, cond.Type)
		if r.announced.flipped(c, cond, prev) {
			r.conditionEvent(c, cond)
		}
		meta.SetStatusCondition(&st.Conditions, cond)
	}
	if passErr == nil && !o.deleting && o.foreignChild == nil {
		st.ObservedGeneration = c.Generation
	}
	if equality.Semantic.DeepEqual(s.originalStatus, st) {
		return nil
	}
	base := c.DeepCopy()
	base.Status = *s.originalStatus
	if err := r.Client.Status().Patch(ctx, c, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing status: %w", err))
	}
	r.written.record(c, st)
	return nil
}

// conditionEvent records a condition's status change as an event: good news
// as Normal, bad news as Warning.
func (r *Reconciler) conditionEvent(c *dbv1.DatabaseCluster, cond metav1.Condition) {
	if cond.Type == dbv1.ConditionProgressing {
		return // progress is visible in status; events are for health changes
	}
	eventType := corev1.EventTypeNormal
	if badNews(cond) {
		eventType = corev1.EventTypeWarning
	}
	r.event(c, eventType, cond.Reason, "StatusChange", "%s is %s: %s", cond.Type, cond.Status, cond.Message)
}

func badNews(cond metav1.Condition) bool {
	return (cond.Type == dbv1.ConditionAvailable && cond.Status != metav1.ConditionTrue && cond.Reason != dbv1.ReasonBootstrapping) ||
		(cond.Type == dbv1.ConditionDegraded && cond.Status == metav1.ConditionTrue)
}

// announcedConditions remembers, per cluster, the status of each condition
// as last announced by an event, so that a flip is announced once: a pass
// that reads the cluster from a cache that has not seen the previous pass's
// status write would otherwise announce the same flip again (at 1000
// clusters on envtest, events were a third of the API server's writes from
// the operator, half of them repeats). A condition's first status is news
// only when it is bad: a new cluster is not announced as "Available is
// False: Bootstrapping". A fresh reconciler falls back to the status read.
type announcedConditions struct {
	perCluster[map[string]metav1.ConditionStatus]
}

// flipped records cond's status and tells whether it is news: a change
// from the status last announced (or, without one, the status read), or a
// first status that is bad.
func (a *announcedConditions) flipped(c *dbv1.DatabaseCluster, cond metav1.Condition, read *metav1.Condition) bool {
	announced, ok := a.get(c)
	if !ok {
		announced = map[string]metav1.ConditionStatus{}
		a.put(c, announced)
	}
	last, known := announced[cond.Type]
	if !known && read != nil {
		last, known = read.Status, true
	}
	announced[cond.Type] = cond.Status
	if !known {
		return badNews(cond)
	}
	return last != cond.Status
}

// countMembers renders "1 member" or "n members".
func countMembers(n int) string {
	if n == 1 {
		return "1 member"
	}
	return fmt.Sprintf("%d members", n)
}
