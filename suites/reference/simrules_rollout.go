package reference

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// The rollout and small-cluster rules (operator/internal/controller/rolling.go),
// judged on transitions. A roll is the operator deleting a member pod that
// did not lose its data (transition.replacedPods).

// checkOnDelete: the StatefulSet never rolls pods by itself.
func checkOnDelete(t *transition) error {
	if sts := t.after.sts; sts != nil && sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		return fmt.Errorf("the StatefulSet's update strategy is %q: its controller would roll pods past the operator's rules", sts.Spec.UpdateStrategy.Type)
	}
	return nil
}

// checkRollOneAtATime: a pass replaces at most one member pod, and none
// while another member's pod is missing or not ready (the last one replaced
// has not come back).
func checkRollOneAtATime(t *transition) error {
	rolled := t.replacedPods()
	if len(rolled) > 1 {
		return fmt.Errorf("one pass replaced %d member pods: %v", len(rolled), podNames(rolled))
	}
	if len(rolled) == 0 || t.before.sts == nil || t.before.sts.Spec.Replicas == nil {
		return nil
	}
	for i := range int(*t.before.sts.Spec.Replicas) {
		name := operator.MemberName(t.before.named(), i)
		if name != rolled[0].Name && !podReady(t.before.pod(name)) {
			return fmt.Errorf("replaced %s while %s was missing or not ready", rolled[0].Name, name)
		}
	}
	return nil
}

// checkRollOnlyHealthy: a member is replaced only while etcd reports every
// member a healthy voter, no learner in flight and (on a fresh read) as
// many voters as the spec asks for.
func checkRollOnlyHealthy(t *transition) error {
	rolled := t.replacedPods()
	if len(rolled) == 0 {
		return nil
	}
	voters, healthy, learners := t.before.counts()
	switch {
	case healthy < voters || learners > 0:
		return fmt.Errorf("replaced %v while etcd had %d of %d voters healthy and %d learner(s)", podNames(rolled), healthy, voters, learners)
	case t.fresh() && t.live() && voters != t.after.desired():
		return fmt.Errorf("replaced %v while etcd had %d voters and spec.replicas is %d: a membership change is in flight", podNames(rolled), voters, t.after.desired())
	}
	return nil
}

// checkRollFollowersFirst: while a follower runs an outdated revision, the
// pod replaced is the outdated follower with the highest ordinal. Judged
// with the member API (without it the operator cannot know the leader) and
// on fresh reads.
func checkRollFollowersFirst(t *transition) error {
	if !t.memberAPI || !t.fresh() {
		return nil
	}
	leader := t.before.leader()
	var first *corev1.Pod
	for i := range t.before.pods {
		p := &t.before.pods[i]
		if p.Name != leader && t.before.outdated(p) && (first == nil || podOrdinal(t, p) > podOrdinal(t, first)) {
			first = p
		}
	}
	for _, p := range t.replacedPods() {
		if first != nil && p.Name != first.Name {
			return fmt.Errorf("replaced %s (leader %q) while %s was the outdated follower with the highest ordinal", p.Name, leader, first.Name)
		}
	}
	return nil
}

// checkRollLeaderHandsOver: the leader's pod is never replaced while it
// leads; a roll moves leadership away only once every other member runs
// the update revision, to one that does. (A scale-down moves leadership
// off the highest ordinal, which is left to the membership rules.)
func checkRollLeaderHandsOver(t *transition) error {
	if !t.memberAPI {
		return nil
	}
	leader := t.before.leader()
	for _, p := range t.replacedPods() {
		if p.Name == leader {
			return fmt.Errorf("replaced %s while it led, without moving leadership first", p.Name)
		}
	}
	if !t.fresh() || leader == "" {
		return nil
	}
	ords := t.before.ordinals()
	if lp := t.before.pod(leader); lp == nil || len(ords) == 0 || podOrdinal(t, lp) == ords[len(ords)-1] {
		return nil // a scale-down's hand-over, or no pod to roll
	}
	for _, c := range t.calls {
		if c.Method != operator.EtcdMethodMoveLeader {
			continue
		}
		to, _ := t.before.member(c.ID)
		if err := rollHandOverBroken(t, leader, t.before.nameOf(to)); err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	return nil
}

// rollHandOverBroken says why moving leadership from leader to to breaks
// the roll's order: the leader must be the last outdated member, and to
// must run the update revision.
func rollHandOverBroken(t *transition, leader, to string) error {
	for i := range t.before.pods {
		p := &t.before.pods[i]
		switch outdated := t.before.outdated(p); {
		case p.Name == leader && !outdated:
			return fmt.Errorf("leadership moved off %s, which already runs the update revision", leader)
		case p.Name != leader && outdated:
			return fmt.Errorf("leadership moved off %s while %s was still outdated: followers go first", leader, p.Name)
		}
	}
	if p := t.before.pod(to); p == nil || t.before.outdated(p) {
		return fmt.Errorf("leadership moved to %s, which does not run the update revision", to)
	}
	return nil
}

// checkSmallNotRolled: a cluster of one or two voters tolerates no member
// down; no member of it is replaced for a roll.
func checkSmallNotRolled(t *transition) error {
	rolled := t.replacedPods()
	if voters, _, _ := t.before.counts(); len(rolled) > 0 && operator.FaultTolerance(voters) == 0 {
		return fmt.Errorf("replaced %v in a cluster of %d voter(s), which tolerates no member down", podNames(rolled), voters)
	}
	return nil
}

// checkSmallSaysWhy: after a clean pass that faced a roll the operator must
// refuse (refusedSmallRoll), Progressing is True, reason WaitingForQuorum.
func checkSmallSaysWhy(t *transition) error {
	outdated := refusedSmallRoll(t)
	if outdated == "" {
		return nil
	}
	voters, _, _ := t.after.counts()
	p := meta.FindStatusCondition(t.after.cluster.Status.Conditions, dbv1.ConditionProgressing)
	if p == nil || p.Status != metav1.ConditionTrue || p.Reason != dbv1.ReasonWaitingForQuorum {
		return fmt.Errorf("a %d-voter cluster with %s outdated is not rolled, but Progressing is %s, not True/%s",
			voters, outdated, describe(p), dbv1.ReasonWaitingForQuorum)
	}
	return nil
}

// refusedSmallRoll names an outdated member pod when the step was a clean
// pass, that left the StatefulSet alone, over a cluster of one or two
// healthy voters, all present and ready, whose StatefulSet has a new
// revision: a roll the operator must refuse. It is "" otherwise.
func refusedSmallRoll(t *transition) string {
	if !t.clean() || !t.live() {
		return ""
	}
	voters, healthy, learners := t.after.counts()
	b, a := t.before.sts, t.after.sts
	if learners > 0 || voters == 0 || operator.FaultTolerance(voters) > 0 || healthy < voters || t.after.desired() != voters ||
		b == nil || a == nil || b.ResourceVersion != a.ResourceVersion || a.Spec.Replicas == nil || int(*a.Spec.Replicas) != voters ||
		a.Status.ObservedGeneration < a.Generation || a.Status.UpdateRevision == "" || len(t.after.pods) != voters {
		return ""
	}
	outdated := ""
	for i := range t.after.pods {
		p := &t.after.pods[i]
		if !podReady(p) {
			return ""
		}
		if t.after.outdated(p) {
			outdated = p.Name
		}
	}
	return outdated
}

func podOrdinal(t *transition, p *corev1.Pod) int { return simOrdinal(t.before.named(), p.Name) }

func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
