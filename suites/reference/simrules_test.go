package reference

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// ruleCase hands a rule check one transition: a steady cluster of three
// healthy voters (steady), changed by setup. want is a substring of the
// violation, or "" when the check must pass.
type ruleCase struct {
	name  string
	setup func(t *transition)
	want  string
}

// ruleCases are the cases of every rule check, by invariant name.
var ruleCases = map[string]func() []ruleCase{
	InvOneChangePerPass:     casesOneChangePerPass,
	InvQuorumTable:          casesQuorumTable,
	InvLeaderToHealthyVoter: casesLeaderToHealthyVoter,
	InvLearnerFirst:         casesLearnerFirst,
	InvReplaceLostFirst:     casesReplaceLostFirst,
	InvRemoveTopOrLost:      casesRemoveTopOrLost,
	InvAddLowest:            casesAddLowest,
	InvStatefulSetFollows:   casesStatefulSetFollows,
	InvTemplateFromSpec:     casesTemplateFromSpec,
	InvWaitSaysWhy:          casesWaitSaysWhy,
	InvOnDelete:             casesOnDelete,
	InvRollOneAtATime:       casesRollOneAtATime,
	InvRollOnlyHealthy:      casesRollOnlyHealthy,
	InvRollFollowersFirst:   casesRollFollowersFirst,
	InvRollLeaderHandsOver:  casesRollLeaderHandsOver,
	InvSmallNotRolled:       casesSmallNotRolled,
	InvSmallSaysWhy:         casesSmallSaysWhy,
}

// TestRuleInvariants: every rule check fails on a state that breaks its
// rule and passes on one that keeps it; a check without both kinds of case
// fails the test.
func TestRuleInvariants(t *testing.T) {
	for _, rc := range ruleChecks {
		t.Run(rc.name, func(t *testing.T) {
			cases := ruleCases[rc.name]
			if cases == nil {
				t.Fatalf("invariant %q has no cases: add some to ruleCases", rc.name)
			}
			breaks, keeps := 0, 0
			for _, tc := range cases() {
				if tc.want == "" {
					keeps++
				} else {
					breaks++
				}
				t.Run(tc.name, func(t *testing.T) {
					tr := steady(3)
					tc.setup(tr)
					err := rc.check(tr)
					if tc.want == "" {
						NewWithT(t).Expect(err).NotTo(HaveOccurred())
					} else {
						NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
					}
				})
			}
			if breaks == 0 || keeps == 0 {
				t.Errorf("invariant %q has %d case(s) that break it and %d that keep it; it needs both", rc.name, breaks, keeps)
			}
		})
	}
}

// Revisions of the pod template: the pods start on rev1.
const rev1, rev2 = "rev-1", "rev-2"

// steady is an operator pass over a steady cluster of n healthy voters, db-0
// leading, every pod ready on rev1, with the member API, that changed
// nothing.
func steady(n int) *transition {
	return &transition{before: steadyState(n), after: steadyState(n), step: sim.StepInfo{ByOperator: true}, memberAPI: true}
}

func steadyState(n int) simState {
	c := NewCluster(simNamespace, "db").WithReplicas(int32(n)).Build()
	c.Status.Conditions = []metav1.Condition{{Type: dbv1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: dbv1.ReasonReconciled}}
	s := simState{key: client.ObjectKeyFromObject(c), cluster: c, sts: &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: "db", ResourceVersion: "7", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       new(int32(n)),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: operator.ContainerName, Image: DefaultImage,
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-members"}}}},
			}}}},
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdateRevision: rev1, Replicas: int32(n)},
	}}
	for i := range n {
		s.members = append(s.members, operator.EtcdMember{ID: id(i), Name: podName(i), PeerURLs: []string{peerURL(i)}, Healthy: true, Leader: i == 0})
		s.pods = append(s.pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: podName(i), UID: types.UID(podName(i) + "-1"),
				Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev1}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	return s
}

func id(ord int) uint64      { return uint64(0x100 + ord) }
func podName(ord int) string { return fmt.Sprintf("db-%d", ord) }
func peerURL(ord int) string {
	c := &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: "db"}}
	return operator.PeerURL(c, podName(ord), operator.BuilderOptions{})
}

// call is a member call on the member at ordinal ord; add adds one there.
func call(method string, ord int) memberCall { return memberCall{Method: method, ID: id(ord)} }
func add(ord int) memberCall {
	return memberCall{Method: operator.EtcdMethodAddLearner, PeerURL: peerURL(ord)}
}

// both applies a change to the state before and after the step.
func (t *transition) both(change func(s *simState)) {
	change(&t.before)
	change(&t.after)
}

// grow makes the state n voters (ordinals 0..n-1) with their pods.
func grow(n int) func(s *simState) {
	return func(s *simState) {
		big := steadyState(n)
		s.members, s.pods, s.sts.Spec.Replicas = big.members, big.pods, big.sts.Spec.Replicas
	}
}

// spec sets spec.replicas.
func spec(n int) func(s *simState) {
	return func(s *simState) { s.cluster.Spec.Replicas = new(int32(n)) }
}

// lead makes the member at ord the leader.
func lead(ord int) func(s *simState) {
	return func(s *simState) {
		for i := range s.members {
			s.members[i].Leader = s.members[i].ID == id(ord)
		}
	}
}

// sick makes the members at these ordinals unhealthy and their pods unready.
func sick(ords ...int) func(s *simState) {
	return func(s *simState) {
		for _, o := range ords {
			for i := range s.members {
				if s.members[i].ID == id(o) {
					s.members[i].Healthy = false
				}
			}
			if p := s.pod(podName(o)); p != nil {
				p.Status.Conditions[0].Status = corev1.ConditionFalse
			}
		}
	}
}

// lost makes the member at ord one whose pod came back without its data.
func lost(ord int) func(s *simState) {
	return func(s *simState) {
		sick(ord)(s)
		s.pod(podName(ord)).Status.ContainerStatuses = []corev1.ContainerStatus{{Name: operator.ContainerName,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Message: LostDataMessage}}}}
	}
}

// learner registers a learner for ordinal ord, started (named, healthy) or not.
func learner(ord int, started bool) func(s *simState) {
	return func(s *simState) {
		m := operator.EtcdMember{ID: id(ord), PeerURLs: []string{peerURL(ord)}, IsLearner: true, Healthy: started}
		if started {
			m.Name = podName(ord)
		}
		s.members = append(s.members, m)
	}
}

// drop removes the member at ord from etcd.
func drop(ord int) func(s *simState) {
	return func(s *simState) {
		for i := range s.members {
			if s.members[i].ID == id(ord) {
				s.members = append(s.members[:i], s.members[i+1:]...)
				return
			}
		}
	}
}

// deleted removes the pods at these ordinals (the operator deleted them).
func deleted(ords ...int) func(s *simState) {
	return func(s *simState) {
		for _, o := range ords {
			for i := range s.pods {
				if s.pods[i].Name == podName(o) {
					s.pods = append(s.pods[:i], s.pods[i+1:]...)
					break
				}
			}
		}
	}
}

// outdated moves the StatefulSet to rev2, with the pods at these ordinals
// still on rev1 and every other one on rev2.
func outdated(ords ...int) func(s *simState) {
	return func(s *simState) {
		s.sts.Status.UpdateRevision = rev2
		for i := range s.pods {
			s.pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] = rev2
			for _, o := range ords {
				if s.pods[i].Name == podName(o) {
					s.pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] = rev1
				}
			}
		}
	}
}

func stale(t *transition) { t.step.Action.Fault = sim.Fault{Kind: sim.Stale, Lag: 2} }
