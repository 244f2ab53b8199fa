package reference

import (
	"context"
	"fmt"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// The documented rules (DocumentedRules) are judged on transitions: the
// world as it was before a step, as it is after it, and the membership
// calls the operator made during it. Each rule's check is a pure function
// of one transition, so that a test can hand it a state that breaks it.
//
// A rule that depends on what the operator read from the API (the spec,
// the pods, the StatefulSet) is judged only on passes that read the current
// state: under a Stale fault the operator acts on an older view, which is
// the world's doing, not a broken rule. etcd's membership and health are
// always read live, so rules about them are judged on every pass.

// simState is what the rule invariants see of the world at one instant.
type simState struct {
	// key names the DatabaseCluster, which names its members.
	key client.ObjectKey
	// cluster is nil once the DatabaseCluster is gone.
	cluster *dbv1.DatabaseCluster
	// sts is nil while the StatefulSet does not exist.
	sts *appsv1.StatefulSet
	// pods are the member pods.
	pods []corev1.Pod
	// members are etcd's members.
	members []operator.EtcdMember
}

// memberCall is one mutating call the operator made on etcd's member API.
type memberCall struct {
	Method  string // operator.EtcdMethodAddLearner, ...Promote, ...Remove, ...MoveLeader
	ID      uint64 // the member acted on (not for AddLearner)
	PeerURL string // AddLearner's peer URL
	Err     error
}

func (c memberCall) String() string {
	arg := c.PeerURL
	if c.Method != operator.EtcdMethodAddLearner {
		arg = fmt.Sprintf("%x", c.ID)
	}
	s := fmt.Sprintf("%s(%s)", c.Method, arg)
	if c.Err != nil {
		s += " -> " + c.Err.Error()
	}
	return s
}

// isChange tells a membership change (add, promote, remove) from a
// leadership move.
func (c memberCall) isChange() bool { return c.Method != operator.EtcdMethodMoveLeader }

// transition is one step as the rule invariants judge it.
type transition struct {
	before, after simState
	// calls are the operator's mutating member calls during the step.
	calls []memberCall
	step  sim.StepInfo
	// memberAPI: the operator runs with etcd's member API (SimOptions).
	memberAPI bool
}

// fresh: the step read the current state (no Stale fault).
func (t *transition) fresh() bool { return t.step.Action.Fault.Kind != sim.Stale }

// clean: the step was an operator pass without a fault of any kind.
func (t *transition) clean() bool {
	return t.step.ByOperator && t.step.Action.Fault.Kind == sim.NoFault
}

// live: the cluster exists after the step and is not being deleted.
func (t *transition) live() bool {
	return t.after.cluster != nil && t.after.cluster.DeletionTimestamp.IsZero()
}

// changes are the membership changes among the calls.
func (t *transition) changes() []memberCall {
	var out []memberCall
	for _, c := range t.calls {
		if c.isChange() {
			out = append(out, c)
		}
	}
	return out
}

// replacedPods are the member pods the operator deleted in the step to roll
// them: those with etcd's last words about lost data are wipes, which
// replace a member, not roll it, and are left out.
func (t *transition) replacedPods() []corev1.Pod {
	if !t.step.ByOperator {
		return nil
	}
	var out []corev1.Pod
	for _, p := range t.before.pods {
		if !lostData(&p) && !slices.ContainsFunc(t.after.pods, func(q corev1.Pod) bool { return q.UID == p.UID }) {
			out = append(out, p)
		}
	}
	return out
}

// ruleCheck judges one transition.
type ruleCheck struct {
	name  string
	kind  sim.InvariantKind
	check func(*transition) error
	// reached, when set, tells a transition in which the check had
	// something to judge: the world notes NoteJudged(name) then, so that a
	// test can show that its schedules reach the rule.
	reached func(*transition) bool
}

// NoteJudged is noted when a rule invariant had something to judge (see
// ruleCheck.reached; only some rules say).
func NoteJudged(invariant string) string { return "judged: " + invariant }

// ruleChecks are the invariants of the documented rules that no older
// invariant checks; DocumentedRules names which checks which rule.
var ruleChecks = []ruleCheck{
	{InvOneChangePerPass, sim.Safety, checkOneChangePerPass, nil},
	{InvQuorumTable, sim.Safety, checkQuorumTable, nil},
	{InvLeaderToHealthyVoter, sim.Safety, checkLeaderToHealthyVoter, nil},
	{InvLearnerFirst, sim.Safety, checkLearnerFirst, nil},
	{InvReplaceLostFirst, sim.Safety, checkReplaceLostFirst, nil},
	{InvRemoveTopOrLost, sim.Safety, checkRemoveTopOrLost, nil},
	{InvAddLowest, sim.Safety, checkAddLowest, nil},
	{InvStatefulSetFollows, sim.Safety, checkStatefulSetFollows, nil},
	{InvTemplateFromSpec, sim.Safety, checkTemplateFromSpec, nil},
	{InvOnDelete, sim.Safety, checkOnDelete, nil},
	{InvRollOneAtATime, sim.Safety, checkRollOneAtATime, nil},
	{InvRollOnlyHealthy, sim.Safety, checkRollOnlyHealthy, nil},
	{InvRollFollowersFirst, sim.Safety, checkRollFollowersFirst, nil},
	{InvRollLeaderHandsOver, sim.Safety, checkRollLeaderHandsOver, nil},
	{InvSmallNotRolled, sim.Safety, checkSmallNotRolled, facesSmallRoll},
	{InvWaitSaysWhy, sim.Honesty, checkWaitSaysWhy, nil},
	{InvSmallSaysWhy, sim.Honesty, checkSmallSaysWhy, facesSmallRoll},
}

// facesSmallRoll: the pass faced a roll of a small cluster, which it must
// refuse.
func facesSmallRoll(t *transition) bool { return refusedSmallRoll(t) != "" }

// ruleInvariants wraps the rule checks as invariants. The first takes the
// step's transition (the state now, the state after the previous step, the
// calls made since), which every later one judges.
func (sw *simWorld) ruleInvariants() []sim.Invariant {
	out := make([]sim.Invariant, len(ruleChecks))
	for i, rc := range ruleChecks {
		out[i] = sim.Invariant{Name: rc.name, Kind: rc.kind, Check: func(ctx context.Context, s sim.StepInfo) error {
			if i == 0 {
				if err := sw.observe(ctx, s); err != nil {
					return err
				}
			}
			if rc.reached != nil && rc.reached(sw.current) {
				sw.w.Note(NoteJudged(rc.name))
			}
			return rc.check(sw.current)
		}}
	}
	return out
}

// observe moves the world's transition on by one step.
func (sw *simWorld) observe(ctx context.Context, s sim.StepInfo) error {
	now, err := sw.snapshot(ctx)
	if err != nil {
		return err
	}
	sw.current = &transition{before: sw.last, after: now, calls: sw.calls, step: s, memberAPI: sw.memberAPI}
	sw.last, sw.calls = now, nil
	return nil
}

// snapshot reads what the rule invariants judge.
func (sw *simWorld) snapshot(ctx context.Context) (simState, error) {
	st := simState{key: sw.key}
	c, err := sw.cluster(ctx)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return st, err
	default:
		st.cluster = c
	}
	sts := &appsv1.StatefulSet{}
	switch err := sw.w.Client.Get(ctx, client.ObjectKey{Namespace: sw.key.Namespace, Name: operator.StatefulSetName(st.named())}, sts); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return st, err
	default:
		st.sts = sts
	}
	if st.pods, err = sw.pods(ctx); err != nil {
		return st, err
	}
	st.members = sw.etcd.Members()
	return st, nil
}

// recordingDialer hands the operator clients that record its mutating member
// calls into the world, for the rule invariants; every call goes through.
type recordingDialer struct {
	operator.EtcdDialer
	record func(memberCall)
}

func (d recordingDialer) Dial(ctx context.Context, endpoints []string) (operator.EtcdClient, error) {
	cl, err := d.EtcdDialer.Dial(ctx, endpoints)
	if err != nil {
		return nil, err
	}
	return recordingClient{EtcdClient: cl, record: d.record}, nil
}

type recordingClient struct {
	operator.EtcdClient
	record func(memberCall)
}

func (c recordingClient) AddLearner(ctx context.Context, peerURL string) (operator.EtcdMember, error) {
	m, err := c.EtcdClient.AddLearner(ctx, peerURL)
	c.record(memberCall{Method: operator.EtcdMethodAddLearner, PeerURL: peerURL, Err: err})
	return m, err
}

func (c recordingClient) Promote(ctx context.Context, id uint64) error {
	err := c.EtcdClient.Promote(ctx, id)
	c.record(memberCall{Method: operator.EtcdMethodPromote, ID: id, Err: err})
	return err
}

func (c recordingClient) Remove(ctx context.Context, id uint64) error {
	err := c.EtcdClient.Remove(ctx, id)
	c.record(memberCall{Method: operator.EtcdMethodRemove, ID: id, Err: err})
	return err
}

func (c recordingClient) MoveLeader(ctx context.Context, to uint64) error {
	err := c.EtcdClient.MoveLeader(ctx, to)
	c.record(memberCall{Method: operator.EtcdMethodMoveLeader, ID: to, Err: err})
	return err
}

// Helpers on one state.

// counts are etcd's voters, how many of them are healthy, and its learners.
func (s *simState) counts() (voters, healthy, learners int) {
	for _, m := range s.members {
		switch {
		case m.IsLearner:
			learners++
		case m.Healthy:
			voters++
			healthy++
		default:
			voters++
		}
	}
	return voters, healthy, learners
}

// member is etcd's member with this ID.
func (s *simState) member(id uint64) (operator.EtcdMember, bool) {
	i := slices.IndexFunc(s.members, func(m operator.EtcdMember) bool { return m.ID == id })
	if i < 0 {
		return operator.EtcdMember{}, false
	}
	return s.members[i], true
}

// named is a DatabaseCluster with only the name and namespace, which name
// its children and members (the cluster itself may be gone).
func (s *simState) named() *dbv1.DatabaseCluster {
	return &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: s.key.Namespace, Name: s.key.Name}}
}

// nameOf is a member's pod name (by peer URL for a learner not started).
func (s *simState) nameOf(m operator.EtcdMember) string { return simMemberName(s.named(), m) }

// ordinalOf is a member's pod ordinal, -1 when it has none.
func (s *simState) ordinalOf(m operator.EtcdMember) int { return simOrdinal(s.named(), s.nameOf(m)) }

// ordinals are the members' ordinals, sorted.
func (s *simState) ordinals() []int {
	out := make([]int, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, s.ordinalOf(m))
	}
	sort.Ints(out)
	return out
}

// leader is the name of etcd's leader, "" when none leads.
func (s *simState) leader() string {
	for _, m := range s.members {
		if m.Leader {
			return s.nameOf(m)
		}
	}
	return ""
}

// pod is the member pod with this name, nil when absent.
func (s *simState) pod(name string) *corev1.Pod {
	for i := range s.pods {
		if s.pods[i].Name == name {
			return &s.pods[i]
		}
	}
	return nil
}

// desired is spec.replicas, 0 once the cluster is gone.
func (s *simState) desired() int {
	if s.cluster == nil {
		return 0
	}
	return int(s.cluster.DesiredReplicas())
}

// outdated: the pod runs another revision than the StatefulSet's update
// revision (false while the StatefulSet has not computed one).
func (s *simState) outdated(p *corev1.Pod) bool {
	return s.sts != nil && s.sts.Status.UpdateRevision != "" &&
		p.Labels[appsv1.ControllerRevisionHashLabelKey] != s.sts.Status.UpdateRevision
}

// lostData: the pod's etcd left the world's last words about its data.
func lostData(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && (t.Message == LostDataMessage || t.Message == RemovedMessage) {
				return true
			}
		}
	}
	return false
}

// podReady: the pod is there, not being deleted, and ready.
func podReady(p *corev1.Pod) bool {
	return p != nil && p.DeletionTimestamp.IsZero() && framework.PodReady(p)
}
