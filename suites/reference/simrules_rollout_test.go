package reference

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Cases of the rollout and small-cluster rules (TestRuleInvariants). A roll
// is set up with outdated(...): the StatefulSet on rev2, the pods named
// still on rev1; deleted(...) after the step is the operator replacing them.

func casesOnDelete() []ruleCase {
	return []ruleCase{
		{name: "OnDelete", setup: func(*transition) {}},
		{name: "no StatefulSet yet", setup: func(t *transition) { t.after.sts = nil }},
		{name: "RollingUpdate", want: `update strategy is "RollingUpdate"`, setup: func(t *transition) {
			t.after.sts.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		}},
	}
}

func casesRollOneAtATime() []ruleCase {
	return []ruleCase{
		{name: "one pod", setup: func(t *transition) { t.both(outdated(0, 1, 2)); t.after.pods = t.after.pods[:2] }},
		{name: "a lost member's pod wiped", setup: func(t *transition) { t.both(lost(1)); t.both(deleted(1)) }},
		{name: "pods deleted by the world, not the operator", setup: func(t *transition) {
			t.step.ByOperator = false
			t.after.pods = nil
		}},
		{name: "every pod at once", want: "one pass replaced 3 member pods", setup: func(t *transition) {
			t.both(outdated(0, 1, 2))
			t.after.pods = nil
		}},
		{name: "the next before the last came back", want: "replaced db-1 while db-2 was missing or not ready", setup: func(t *transition) {
			t.both(outdated(0, 1))
			t.both(deleted(2))
			t.after = t.before
			t.after.pods = t.before.pods[:1]
		}},
	}
}

func casesRollOnlyHealthy() []ruleCase {
	return []ruleCase{
		{name: "every member healthy", setup: func(t *transition) { t.both(outdated(0, 1, 2)); t.after.pods = t.after.pods[:2] }},
		{name: "a member down in etcd", want: "while etcd had 2 of 3 voters healthy", setup: func(t *transition) {
			t.both(outdated(0, 1, 2))
			t.before.members[0].Healthy = false
			t.after.pods = t.after.pods[:2]
		}},
		{name: "a learner in flight", want: "and 1 learner(s)", setup: func(t *transition) {
			t.both(outdated(0, 1, 2))
			t.both(learner(3, true))
			t.after.pods = t.after.pods[:2]
		}},
		{name: "a scale in flight", want: "a membership change is in flight", setup: func(t *transition) {
			t.both(outdated(0, 1, 2))
			t.both(spec(5))
			t.after.pods = t.after.pods[:2]
		}},
	}
}

func casesRollFollowersFirst() []ruleCase {
	return []ruleCase{
		{name: "the highest follower", setup: func(t *transition) { t.both(outdated(0, 1, 2)); t.both(deleted(2)) }},
		{name: "the leader, last", setup: func(t *transition) { t.both(outdated(0)); t.both(lead(1)); t.after.pods = t.after.pods[1:] }},
		{name: "without the member API, by ordinal", setup: func(t *transition) {
			t.memberAPI = false
			t.both(outdated(0, 1, 2))
			t.both(lead(2))
			t.after.pods = t.after.pods[:2]
		}},
		{name: "a lower follower first", want: "while db-2 was the outdated follower with the highest ordinal", setup: func(t *transition) {
			t.both(outdated(0, 1, 2))
			t.after.pods = append(t.after.pods[:1:1], t.after.pods[2])
		}},
		{name: "the leader before its followers", want: "replaced db-2 (leader \"db-2\") while db-1", setup: func(t *transition) {
			t.both(outdated(0, 1, 2))
			t.both(lead(2))
			t.after.pods = t.after.pods[:2]
		}},
	}
}

func casesRollLeaderHandsOver() []ruleCase {
	return []ruleCase{
		{name: "leadership moved to an updated member", setup: func(t *transition) {
			t.both(outdated(1))
			t.both(lead(1))
			t.calls = []memberCall{call(move, 0)}
		}},
		{name: "a scale-down's hand-over off the highest ordinal", setup: func(t *transition) {
			t.both(lead(2))
			t.calls = []memberCall{call(move, 0)}
		}},
		{name: "the leader's pod replaced while it leads", want: "replaced db-1 while it led", setup: func(t *transition) {
			t.both(outdated(1))
			t.both(lead(1))
			t.after.pods = append(t.after.pods[:1:1], t.after.pods[2])
		}},
		{name: "leadership moved while a follower is outdated", want: "while db-2 was still outdated: followers go first", setup: func(t *transition) {
			t.both(outdated(1, 2))
			t.both(lead(1))
			t.calls = []memberCall{call(move, 0)}
		}},
		{name: "leadership moved off an updated leader", want: "off db-1, which already runs the update revision", setup: func(t *transition) {
			t.both(outdated())
			t.both(lead(1))
			t.calls = []memberCall{call(move, 2)}
		}},
	}
}

func casesSmallNotRolled() []ruleCase {
	return []ruleCase{
		{name: "three voters", setup: func(t *transition) { t.both(outdated(0, 1, 2)); t.both(deleted(2)) }},
		{name: "two voters, nothing replaced", setup: func(t *transition) { t.both(grow(2)); t.both(outdated(0, 1)) }},
		{name: "two voters", want: "replaced [db-1] in a cluster of 2 voter(s)", setup: func(t *transition) {
			t.both(grow(2))
			t.both(outdated(0, 1))
			t.both(spec(2))
			t.after.pods = t.after.pods[:1]
		}},
		{name: "one voter", want: "replaced [db-0] in a cluster of 1 voter(s)", setup: func(t *transition) {
			t.both(grow(1))
			t.both(outdated(0))
			t.after.pods = nil
		}},
	}
}

func casesSmallSaysWhy() []ruleCase {
	refused := func(t *transition) {
		t.both(grow(2))
		t.both(spec(2))
		t.both(outdated(0, 1))
	}
	return []ruleCase{
		{name: "refused and says so", setup: func(t *transition) {
			refused(t)
			t.after.cluster.Status.Conditions[0] = metav1.Condition{Type: dbv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: dbv1.ReasonWaitingForQuorum}
		}},
		{name: "a member down: the roll waits for it", setup: func(t *transition) { refused(t); t.both(sick(1)) }},
		{name: "the pass wrote the StatefulSet", setup: func(t *transition) { refused(t); t.after.sts.ResourceVersion = "8" }},
		{name: "a faulty pass", setup: func(t *transition) { refused(t); stale(t) }},
		{name: "three voters roll", setup: func(t *transition) { t.both(outdated(0, 1, 2)) }},
		{name: "refused, yet Reconciled", want: "a 2-voter cluster with db-1 outdated is not rolled, but Progressing is False", setup: refused},
		{name: "one voter, refused, yet Reconciled", want: "a 1-voter cluster with db-0 outdated", setup: func(t *transition) {
			t.both(grow(1))
			t.both(spec(1))
			t.both(outdated(0))
		}},
	}
}
