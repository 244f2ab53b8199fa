package reference

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Cases of the membership rules (TestRuleInvariants). Ordinals: db-0 leads
// the steady cluster of three unless a case says otherwise.

const (
	promote = operator.EtcdMethodPromote
	remove  = operator.EtcdMethodRemove
	move    = operator.EtcdMethodMoveLeader
)

func casesOneChangePerPass() []ruleCase {
	return []ruleCase{
		{name: "one change", setup: func(t *transition) { t.calls = []memberCall{add(3)} }},
		{name: "a leadership move and a removal", setup: func(t *transition) { t.calls = []memberCall{call(move, 1), call(remove, 2)} }},
		{name: "a learner added and promoted in one pass", want: "made 2 membership changes",
			setup: func(t *transition) { t.calls = []memberCall{add(3), call(promote, 3)} }},
		{name: "two removals, the second refused", want: "made 2 membership changes", setup: func(t *transition) {
			t.calls = []memberCall{call(remove, 2), {Method: remove, ID: id(1), Err: errors.New("refused")}}
		}},
	}
}

func casesQuorumTable() []ruleCase {
	return []ruleCase{
		{name: "a voter removed, every voter healthy", setup: func(t *transition) { t.calls = []memberCall{call(remove, 2)} }},
		{name: "a learner removed without a quorum", setup: func(t *transition) {
			t.both(sick(0, 1))
			t.before.members = append(t.before.members, operator.EtcdMember{ID: id(3), PeerURLs: []string{peerURL(3)}, IsLearner: true})
			t.calls = []memberCall{call(remove, 3)}
		}},
		{name: "a healthy voter removed while another is down", want: "healthy-(X healthy) >= quorum(V-1)", setup: func(t *transition) {
			t.both(sick(1))
			t.calls = []memberCall{call(remove, 2)}
		}},
		{name: "a learner added without a quorum", want: "adding a learner needs healthy >= quorum(V)", setup: func(t *transition) {
			t.both(sick(1, 2))
			t.calls = []memberCall{add(3)}
		}},
		{name: "a learner promoted before it started", want: "the learner started and healthy", setup: func(t *transition) {
			t.both(learner(3, false))
			t.calls = []memberCall{call(promote, 3)}
		}},
		{name: "a promotion with 2 of 4 voters healthy", want: "changing the voters needs healthy >= quorum(V)", setup: func(t *transition) {
			t.both(grow(4))
			t.both(sick(2, 3))
			t.both(learner(4, true))
			t.calls = []memberCall{call(promote, 4)}
		}},
		{name: "the last voter removed", want: "would leave no voter", setup: func(t *transition) {
			t.both(grow(1))
			t.calls = []memberCall{call(remove, 0)}
		}},
	}
}

func casesLeaderToHealthyVoter() []ruleCase {
	return []ruleCase{
		{name: "to a healthy voter", setup: func(t *transition) { t.calls = []memberCall{call(move, 1)} }},
		{name: "to a member that is down", want: "not a healthy voter", setup: func(t *transition) {
			t.both(sick(1))
			t.calls = []memberCall{call(move, 1)}
		}},
		{name: "to a learner", want: "not a healthy voter", setup: func(t *transition) {
			t.both(learner(3, true))
			t.calls = []memberCall{call(move, 3)}
		}},
	}
}

func casesLearnerFirst() []ruleCase {
	return []ruleCase{
		{name: "the learner promoted", setup: func(t *transition) {
			t.before.members = append(t.before.members, operator.EtcdMember{ID: id(3), Name: podName(3), PeerURLs: []string{peerURL(3)}, IsLearner: true, Healthy: true})
			t.calls = []memberCall{call(promote, 3)}
		}},
		{name: "no learner, one added", setup: func(t *transition) { t.calls = []memberCall{add(3)} }},
		{name: "a voter removed while a learner is in flight", want: "a learner is finished first", setup: func(t *transition) {
			t.both(learner(3, false))
			t.calls = []memberCall{call(remove, 2)}
		}},
		{name: "a second learner added", want: "a learner is finished first", setup: func(t *transition) {
			t.both(learner(3, true))
			t.calls = []memberCall{add(4)}
		}},
	}
}

func casesReplaceLostFirst() []ruleCase {
	fourOfThree := func(t *transition) {
		t.both(grow(4))
		t.both(spec(3))
		t.both(lost(1))
	}
	return []ruleCase{
		{name: "the lost member removed first", setup: func(t *transition) {
			fourOfThree(t)
			t.calls = []memberCall{call(remove, 1)}
		}},
		{name: "a lost member beyond the spec goes by scale-down", setup: func(t *transition) {
			t.both(grow(4))
			t.both(spec(3))
			t.both(lost(3))
			t.calls = []memberCall{call(remove, 3)}
		}},
		{name: "a scale-down before the lost member is replaced", want: "those are replaced first", setup: func(t *transition) {
			fourOfThree(t)
			t.calls = []memberCall{call(remove, 3)}
		}},
		{name: "a scale-up before the lost member is replaced", want: "those are replaced first", setup: func(t *transition) {
			t.both(lost(1))
			t.both(spec(5))
			t.calls = []memberCall{add(3)}
		}},
		{name: "a stale pass is not judged", setup: func(t *transition) {
			fourOfThree(t)
			stale(t)
			t.calls = []memberCall{call(remove, 3)}
		}},
	}
}

func casesRemoveTopOrLost() []ruleCase {
	fourOfThree := func(t *transition) {
		t.both(grow(4))
		t.both(spec(3))
	}
	return []ruleCase{
		{name: "the highest beyond the spec", setup: func(t *transition) { fourOfThree(t); t.calls = []memberCall{call(remove, 3)} }},
		{name: "a member that lost its data", setup: func(t *transition) { t.both(lost(1)); t.calls = []memberCall{call(remove, 1)} }},
		{name: "an unhealthy member under a stale read", setup: func(t *transition) {
			t.both(sick(1))
			stale(t)
			t.calls = []memberCall{call(remove, 1)}
		}},
		{name: "not the highest", want: "a scale-down removes the highest first", setup: func(t *transition) {
			fourOfThree(t)
			t.calls = []memberCall{call(remove, 2)}
		}},
		{name: "the highest, but within the spec", want: "within spec.replicas=3", setup: func(t *transition) {
			t.calls = []memberCall{call(remove, 2)}
		}},
		{name: "a healthy member under a stale read", want: "a scale-down removes the highest first", setup: func(t *transition) {
			fourOfThree(t)
			stale(t)
			t.calls = []memberCall{call(remove, 1)}
		}},
	}
}

func casesAddLowest() []ruleCase {
	return []ruleCase{
		{name: "the missing ordinal", setup: func(t *transition) { t.both(drop(1)); t.calls = []memberCall{add(1)} }},
		{name: "the next ordinal", setup: func(t *transition) { t.both(spec(5)); t.calls = []memberCall{add(3)} }},
		{name: "past a missing ordinal", want: "the lowest ordinal that is no member is 1", setup: func(t *transition) {
			t.both(drop(1))
			t.both(spec(5))
			t.calls = []memberCall{add(3)}
		}},
		{name: "beyond the spec", want: "beyond spec.replicas=3", setup: func(t *transition) { t.calls = []memberCall{add(3)} }},
	}
}

func casesStatefulSetFollows() []ruleCase {
	return []ruleCase{
		{name: "grown over a registered learner", setup: func(t *transition) {
			t.after.sts.Spec.Replicas = new(int32(4))
			t.after.members = append(t.after.members, operator.EtcdMember{ID: id(3), PeerURLs: []string{peerURL(3)}, IsLearner: true})
		}},
		{name: "shrunk after the member went", setup: func(t *transition) {
			t.before.sts.Spec.Replicas = new(int32(4))
			t.before.members = append(t.before.members, operator.EtcdMember{ID: id(3), Name: podName(3), Healthy: true})
		}},
		{name: "grown without the member API", setup: func(t *transition) {
			t.memberAPI = false
			t.after.sts.Spec.Replicas = new(int32(4))
		}},
		{name: "grown before the learner is registered", want: "ordinal 3 is no etcd member", setup: func(t *transition) {
			t.after.sts.Spec.Replicas = new(int32(4))
		}},
		{name: "shrunk before the member went", want: "while ordinal 2 is still an etcd member", setup: func(t *transition) {
			t.after.sts.Spec.Replicas = new(int32(2))
		}},
	}
}

func casesTemplateFromSpec() []ruleCase {
	return []ruleCase{
		{name: "unchanged", setup: func(*transition) {}},
		{name: "a new image", setup: func(t *transition) { t.after.sts.Spec.Template.Spec.Containers[0].Image = "gauntlet.dev/etcd:v3.6.17" }},
		{name: "a timestamp annotation", want: "the pod template changed, but not its images or resources", setup: func(t *transition) {
			t.after.sts.Spec.Template.Annotations = map[string]string{"gauntlet.dev/reconciled-at": "12:00:01.000"}
		}},
		{name: "the initial cluster in the template", want: "the pod template changed, but not its images or resources", setup: func(t *transition) {
			t.after.sts.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: operator.EnvInitialCluster, Value: "db-0=...,db-1=..."}}
		}},
	}
}

func casesWaitSaysWhy() []ruleCase {
	midScale := func(t *transition) {
		t.both(spec(5))
		t.after.members = append(t.after.members, operator.EtcdMember{ID: id(3), PeerURLs: []string{peerURL(3)}, IsLearner: true})
	}
	return []ruleCase{
		{name: "membership as the spec asks", setup: func(*transition) {}},
		{name: "a scale under way, and Progressing says so", setup: func(t *transition) {
			midScale(t)
			t.after.cluster.Status.Conditions[0] = metav1.Condition{Type: dbv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: dbv1.ReasonScaling}
		}},
		{name: "no member pod ready: etcd could not be read", setup: func(t *transition) {
			midScale(t)
			t.before.pods = nil
		}},
		{name: "a scale under way, yet Reconciled", want: "etcd has 3 voter(s) and 1 learner(s), spec.replicas is 5, but Progressing is False", setup: midScale},
	}
}
