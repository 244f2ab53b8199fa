package reference

import (
	"fmt"
	"slices"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// The membership rules (operator/internal/controller/membership.go and
// memberchange.go), judged on transitions.

// checkOneChangePerPass: one membership change per pass.
func checkOneChangePerPass(t *transition) error {
	if ch := t.changes(); len(ch) > 1 {
		return fmt.Errorf("one operator pass made %d membership changes: %v", len(ch), ch)
	}
	return nil
}

// checkQuorumTable holds every membership change the operator asked for to
// its row of the table in membership.go, against etcd's membership as the
// pass found it. etcd refuses some of these itself; this asks more, and
// does not rest on etcd's refusal.
func checkQuorumTable(t *transition) error {
	voters, healthy, _ := t.before.counts()
	q := operator.Quorum
	for _, c := range t.changes() {
		var broken string
		switch c.Method {
		case operator.EtcdMethodAddLearner:
			if healthy < q(voters) {
				broken = fmt.Sprintf("adding a learner needs healthy >= quorum(V); %d of %d voters healthy, quorum %d", healthy, voters, q(voters))
			}
		case operator.EtcdMethodPromote:
			l, ok := t.before.member(c.ID)
			switch {
			case !ok || !l.IsLearner:
			case !l.Healthy || l.Name == "":
				broken = fmt.Sprintf("promoting needs the learner started and healthy; %s is not", t.before.nameOf(l))
			case healthy+1 < q(voters+1):
				broken = fmt.Sprintf("promoting needs healthy+1 >= quorum(V+1); %d+1 of %d voters, quorum %d", healthy, voters+1, q(voters+1))
			case healthy < q(voters):
				broken = fmt.Sprintf("changing the voters needs healthy >= quorum(V); %d of %d voters healthy, quorum %d", healthy, voters, q(voters))
			}
		case operator.EtcdMethodRemove:
			broken = removalBreaksTable(t, c, voters, healthy)
		}
		if broken != "" {
			return fmt.Errorf("%s: %s", c, broken)
		}
	}
	return nil
}

// removalBreaksTable says which row a voter's removal breaks, "" if none.
func removalBreaksTable(t *transition, c memberCall, voters, healthy int) string {
	x, ok := t.before.member(c.ID)
	if !ok || x.IsLearner {
		return "" // removing a learner needs nothing: it does not vote
	}
	q := operator.Quorum
	left := healthy
	if x.Healthy {
		left--
	}
	switch {
	case voters-1 < 1:
		return fmt.Sprintf("removing %s would leave no voter", t.before.nameOf(x))
	case left < q(voters-1):
		return fmt.Sprintf("removing a voter needs healthy-(X healthy) >= quorum(V-1); %d of %d voters left healthy, quorum %d", left, voters-1, q(voters-1))
	case healthy < q(voters):
		return fmt.Sprintf("changing the voters needs healthy >= quorum(V); %d of %d voters healthy, quorum %d", healthy, voters, q(voters))
	}
	return ""
}

// checkLeaderToHealthyVoter: leadership moves only to a healthy voter.
func checkLeaderToHealthyVoter(t *transition) error {
	for _, c := range t.calls {
		if c.Method != operator.EtcdMethodMoveLeader {
			continue
		}
		y, ok := t.before.member(c.ID)
		if !ok || y.IsLearner || !y.Healthy {
			return fmt.Errorf("%s: leadership moved to %s, which is not a healthy voter (%+v)", c, t.before.nameOf(y), y)
		}
	}
	return nil
}

// checkLearnerFirst: while a learner is in flight, the only change the
// operator makes is to that learner (promote or remove it).
func checkLearnerFirst(t *transition) error {
	var learners []uint64
	for _, m := range t.before.members {
		if m.IsLearner {
			learners = append(learners, m.ID)
		}
	}
	if len(learners) == 0 {
		return nil
	}
	for _, c := range t.calls {
		onLearner := (c.Method == operator.EtcdMethodPromote || c.Method == operator.EtcdMethodRemove) && slices.Contains(learners, c.ID)
		if !onLearner {
			return fmt.Errorf("%s while learner(s) %x were in flight: a learner is finished first", c, learners)
		}
	}
	return nil
}

// checkReplaceLostFirst: while a wanted voter has lost its data (its pod
// shows etcd's last words), the operator neither adds a member nor removes
// another one (a learner in flight still comes first).
func checkReplaceLostFirst(t *transition) error {
	if !t.fresh() || !t.live() {
		return nil
	}
	if _, _, learners := t.before.counts(); learners > 0 {
		return nil
	}
	var lost []uint64
	for _, m := range t.before.members {
		if !m.Healthy && t.before.ordinalOf(m) < t.after.desired() && lostData(t.before.pod(t.before.nameOf(m))) {
			lost = append(lost, m.ID)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	for _, c := range t.changes() {
		if c.Method == operator.EtcdMethodAddLearner || (c.Method == operator.EtcdMethodRemove && !slices.Contains(lost, c.ID)) {
			return fmt.Errorf("%s while member(s) %x had lost their data: those are replaced first", c, lost)
		}
	}
	return nil
}

// checkRemoveTopOrLost: a voter is removed only when it is the highest
// ordinal and beyond the spec (a scale-down), or when its pod came back
// without its data (a replacement). Under a Stale fault the pass may have
// seen a lost member's old pod: an unhealthy voter's removal is let be.
func checkRemoveTopOrLost(t *transition) error {
	for _, c := range t.changes() {
		x, ok := t.before.member(c.ID)
		if c.Method != operator.EtcdMethodRemove || !ok || x.IsLearner {
			continue
		}
		name, ord := t.before.nameOf(x), t.before.ordinalOf(x)
		if lostData(t.before.pod(name)) || (!t.fresh() && !x.Healthy) {
			continue
		}
		if ords := t.before.ordinals(); ord != ords[len(ords)-1] {
			return fmt.Errorf("%s removed %s (ordinal %d), whose data was not lost, while ordinal %d was a member: a scale-down removes the highest first",
				c, name, ord, ords[len(ords)-1])
		}
		if t.fresh() && t.live() && ord < t.after.desired() {
			return fmt.Errorf("%s removed %s, whose data was not lost, within spec.replicas=%d", c, name, t.after.desired())
		}
	}
	return nil
}

// checkAddLowest: a learner is added at the lowest ordinal that is no
// member, and (on a fresh read) within the spec.
func checkAddLowest(t *transition) error {
	taken := t.before.ordinals()
	lowest := 0
	for slices.Contains(taken, lowest) {
		lowest++
	}
	c0 := t.before.named()
	for _, c := range t.changes() {
		if c.Method != operator.EtcdMethodAddLearner {
			continue
		}
		ord := -1
		for i := range maxSimOrdinal {
			if operator.PeerURL(c0, operator.MemberName(c0, i), operator.BuilderOptions{}) == c.PeerURL {
				ord = i
			}
		}
		if ord != lowest {
			return fmt.Errorf("%s added ordinal %d, but the lowest ordinal that is no member is %d", c, ord, lowest)
		}
		if t.fresh() && t.live() && ord >= t.after.desired() {
			return fmt.Errorf("%s added ordinal %d beyond spec.replicas=%d", c, ord, t.after.desired())
		}
	}
	return nil
}

// checkStatefulSetFollows: once the cluster has formed, the StatefulSet
// grows only over ordinals etcd has registered, and shrinks only below the
// members etcd still has. Judged with the member API on (without it the
// operator only sizes the StatefulSet) and on fresh reads.
func checkStatefulSetFollows(t *transition) error {
	b, a := t.before.sts, t.after.sts
	if !t.memberAPI || !t.fresh() || !t.live() || b == nil || a == nil || len(t.before.members) == 0 || b.Spec.Replicas == nil || a.Spec.Replicas == nil {
		return nil
	}
	from, to := int(*b.Spec.Replicas), int(*a.Spec.Replicas)
	ords := t.after.ordinals()
	for o := from; o < to; o++ {
		if !slices.Contains(ords, o) {
			return fmt.Errorf("the StatefulSet grew from %d to %d, but ordinal %d is no etcd member (members at ordinals %v)", from, to, o, ords)
		}
	}
	if to < from && len(ords) > 0 && ords[len(ords)-1] >= to {
		return fmt.Errorf("the StatefulSet shrank from %d to %d while ordinal %d is still an etcd member", from, to, ords[len(ords)-1])
	}
	return nil
}

// checkTemplateFromSpec: the pod template changes only where the spec puts
// something in it (the images, the resources). The initial cluster, which
// changes with the membership, is read from a ConfigMap when a member
// starts, so that scaling restarts nobody.
func checkTemplateFromSpec(t *transition) error {
	b, a := t.before.sts, t.after.sts
	if b == nil || a == nil {
		return nil
	}
	bRest, bSpec := splitTemplate(b)
	aRest, aSpec := splitTemplate(a)
	if !equality.Semantic.DeepEqual(bRest, aRest) && equality.Semantic.DeepEqual(bSpec, aSpec) {
		return fmt.Errorf("the pod template changed, but not its images or resources (which is all the spec puts there) (-before +after):\n%s", cmp.Diff(bRest, aRest))
	}
	return nil
}

// splitTemplate splits a StatefulSet's pod template in two: everything but
// the containers' images and resources, and those.
func splitTemplate(sts *appsv1.StatefulSet) (rest *corev1.PodTemplateSpec, fromSpec []any) {
	rest = sts.Spec.Template.DeepCopy()
	for i := range rest.Spec.Containers {
		c := &rest.Spec.Containers[i]
		fromSpec = append(fromSpec, c.Image, c.Resources)
		c.Image, c.Resources = "", corev1.ResourceRequirements{}
	}
	return rest, fromSpec
}

// checkWaitSaysWhy: after a clean pass that could read etcd's membership
// (the operator asks etcd through the ready member pods), while that
// membership differs from spec.replicas or a learner is in flight,
// Progressing is True: the pass either took a step or says why it waits.
// With no member pod ready the operator keeps everything as it is and says
// so only when the members ConfigMap differs from the spec, which this
// rule does not cover.
func checkWaitSaysWhy(t *transition) error {
	if !t.clean() || !t.live() || !t.memberAPI || !slices.ContainsFunc(t.before.pods, func(p corev1.Pod) bool { return podReady(&p) }) {
		return nil
	}
	voters, _, learners := t.after.counts()
	desired := t.after.desired()
	if voters == 0 || (voters == desired && learners == 0) {
		return nil
	}
	c := t.after.cluster
	if p := meta.FindStatusCondition(c.Status.Conditions, dbv1.ConditionProgressing); p == nil || p.Status != metav1.ConditionTrue {
		return fmt.Errorf("etcd has %d voter(s) and %d learner(s), spec.replicas is %d, but Progressing is %s", voters, learners, desired, describe(p))
	}
	return nil
}

func describe(c *metav1.Condition) string {
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s (%s: %s)", c.Status, c.Reason, c.Message)
}
