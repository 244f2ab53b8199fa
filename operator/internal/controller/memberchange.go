package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	ctrl "sigs.k8s.io/controller-runtime"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// membershipStep plans and takes one step, and returns the membership as it
// is after the step. One change at a time, in this order: a learner in
// flight is finished, a member that lost its data is replaced, the highest
// ordinal beyond the spec is removed, the lowest missing one is added.
// Rule: membership-one-at-a-time
// Rule: membership-learner-first
// Rule: membership-replace-lost-first
// Rule: membership-scale-down-highest
// Rule: membership-scale-up-lowest
// (Each "Rule:" line names a rule that a simulation invariant checks; see
// suites/reference/rules.go.)
func (r *Reconciler) membershipStep(ctx context.Context, s *scope, members []member, desired int) ([]member, ctrl.Result, error) {
	p := &membershipPlan{r: r, s: s, members: members, desired: desired}
	for _, m := range s.apiMembers {
		if !m.IsLearner {
			p.voters++
			if m.Healthy {
				p.healthy++
			}
		}
	}
	if i := slices.IndexFunc(members, func(m member) bool { return m.IsLearner }); i >= 0 {
		return p.finishLearner(ctx, i)
	}
	for i, m := range members {
		if m.IsLearner || m.Healthy || m.ordinal >= desired {
			continue
		}
		if why := lostData(s.pod(m.name)); why != "" {
			return p.replaceLost(ctx, i, why)
		}
	}
	if n := len(members); n > 0 && members[n-1].ordinal >= desired {
		return p.scaleDown(ctx)
	}
	if len(members) < desired {
		return p.scaleUp(ctx)
	}
	return members, ctrl.Result{}, nil
}

// membershipPlan is one pass's view of the membership: the members, the
// size the spec asks for and the voters etcd reports, healthy or not.
type membershipPlan struct {
	r               *Reconciler
	s               *scope
	members         []member
	desired         int
	voters, healthy int
}

// wait shows why the step cannot be taken yet and looks again soon.
func (p *membershipPlan) wait(reason, format string, args ...any) ([]member, ctrl.Result, error) {
	p.s.waitFor(reason, fmt.Sprintf(format, args...))
	return p.members, ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
}

// again ends the step with the membership as it now is, to look again soon.
func (p *membershipPlan) again(members []member) ([]member, ctrl.Result, error) {
	return members, ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
}

// failed ends the step with an error (retried with backoff).
func (p *membershipPlan) failed(err error) ([]member, ctrl.Result, error) {
	return p.members, ctrl.Result{}, err
}

// finishLearner takes the learner at i to its end: removed when no longer
// wanted, wiped when it starts on a removed member's data, or promoted once
// it has caught up and the promotion keeps a quorum.
func (p *membershipPlan) finishLearner(ctx context.Context, i int) ([]member, ctrl.Result, error) {
	s, l, voters, healthy := p.s, p.members[i], p.voters, p.healthy
	switch {
	case l.ordinal >= p.desired:
		if err := s.memberCall("removing learner "+l.name, func(cl etcd.Client) error { return cl.Remove(ctx, l.ID) }); err != nil {
			return p.failed(err)
		}
		s.step("removed learner %s, no longer wanted", l.name)
		return p.again(slices.Delete(p.members, i, i+1))
	case lostData(s.pod(l.name)) != "":
		// The learner's pod starts on what is left of a removed member.
		if err := p.r.wipeMember(ctx, s, s.pod(l.name)); err != nil {
			return p.failed(err)
		}
		s.waitFor(dbv1.ReasonReplacingMember, fmt.Sprintf("adding member %s: deleted its pod and volume, which held a removed member's data", l.name))
		return p.again(p.members)
	case !l.Healthy || l.Name == "":
		return p.wait(dbv1.ReasonScaling, "adding member %s: waiting for the learner to start", l.name)
	case healthy+1 < etcd.Quorum(voters+1):
		return p.wait(dbv1.ReasonWaitingForQuorum, "promoting %s would leave %d healthy of %d voters, below quorum %d",
			l.name, healthy+1, voters+1, etcd.Quorum(voters+1))
	case healthy < etcd.Quorum(voters):
		return p.wait(dbv1.ReasonWaitingForQuorum, "promoting %s: only %d of %d voters healthy, quorum is %d",
			l.name, healthy, voters, etcd.Quorum(voters))
	}
	err := s.memberCall("promoting "+l.name, func(cl etcd.Client) error { return cl.Promote(ctx, l.ID) })
	if errors.Is(err, etcd.ErrLearnerNotReady) {
		return p.wait(dbv1.ReasonScaling, "adding member %s: the learner is catching up with the leader", l.name)
	}
	if err != nil {
		return p.failed(err)
	}
	p.members[i].IsLearner = false
	s.step("promoted %s to a voting member", l.name)
	return p.members, ctrl.Result{}, nil
}

// replaceLost removes the member at i, whose pod came back without its
// data (a lost volume): it can never rejoin as itself, so it rejoins as a
// new member. No other member within the spec is ever removed.
// Rule: membership-replace-only-lost
// (See suites/reference/rules.go.)
func (p *membershipPlan) replaceLost(ctx context.Context, i int, why string) ([]member, ctrl.Result, error) {
	s, m, voters, healthy := p.s, p.members[i], p.voters, p.healthy
	if healthy < etcd.Quorum(voters-1) {
		return p.wait(dbv1.ReasonWaitingForQuorum, "replacing %s: removing it would leave %d healthy of %d voters, below quorum %d",
			m.name, healthy, voters-1, etcd.Quorum(voters-1))
	}
	if healthy < etcd.Quorum(voters) {
		return p.wait(dbv1.ReasonWaitingForQuorum, "replacing %s: only %d of %d voters healthy, quorum is %d",
			m.name, healthy, voters, etcd.Quorum(voters))
	}
	if err := s.memberCall("removing "+m.name, func(cl etcd.Client) error { return cl.Remove(ctx, m.ID) }); err != nil {
		return p.failed(err)
	}
	s.waitFor(dbv1.ReasonReplacingMember, fmt.Sprintf("replacing %s, which restarted without its data (%s): removed it, it rejoins as a new member", m.name, why))
	return p.again(slices.Delete(p.members, i, i+1))
}

// scaleDown removes the highest ordinal beyond the spec, once the removal
// keeps a quorum, handing leadership over first if it leads.
func (p *membershipPlan) scaleDown(ctx context.Context) ([]member, ctrl.Result, error) {
	s, n, voters, healthy := p.s, len(p.members), p.voters, p.healthy
	x := p.members[n-1]
	after := healthy
	if x.Healthy {
		after--
	}
	switch {
	case voters-1 < 1 || after < etcd.Quorum(voters-1):
		return p.wait(dbv1.ReasonWaitingForQuorum, "removing %s would leave %d healthy of %d voters, below quorum %d",
			x.name, after, voters-1, etcd.Quorum(voters-1))
	case healthy < etcd.Quorum(voters):
		return p.wait(dbv1.ReasonWaitingForQuorum, "removing %s: only %d of %d voters healthy, quorum is %d",
			x.name, healthy, voters, etcd.Quorum(voters))
	}
	if x.Leader {
		return p.handOverLeadership(ctx, x)
	}
	if err := s.memberCall("removing "+x.name, func(cl etcd.Client) error { return cl.Remove(ctx, x.ID) }); err != nil {
		return p.failed(err)
	}
	s.step("removed member %s", x.name)
	return p.members[:n-1], ctrl.Result{}, nil
}

// handOverLeadership moves leadership from x, the last member, to the first
// healthy voter, so that x can be removed on the next step: a leader is
// never removed while it leads.
// Rule: membership-leader-handed-over
// (See suites/reference/rules.go.)
func (p *membershipPlan) handOverLeadership(ctx context.Context, x member) ([]member, ctrl.Result, error) {
	to := -1
	for j, m := range p.members[:len(p.members)-1] {
		if m.Healthy && !m.IsLearner {
			to = j
			break
		}
	}
	if to < 0 {
		return p.wait(dbv1.ReasonWaitingForQuorum, "removing %s: no healthy voter to hand leadership to", x.name)
	}
	y := p.members[to]
	if err := p.s.memberCall("moving leadership to "+y.name, func(cl etcd.Client) error { return cl.MoveLeader(ctx, y.ID) }); err != nil {
		return p.failed(err)
	}
	p.s.step("moved leadership from %s to %s before removing it", x.name, y.name)
	return p.again(p.members)
}

// scaleUp adds the lowest missing ordinal as a learner, clearing first a
// volume left by a removed member.
func (p *membershipPlan) scaleUp(ctx context.Context) ([]member, ctrl.Result, error) {
	s, c := p.s, p.s.cluster
	ord := 0
	for _, m := range p.members {
		if m.ordinal != ord {
			break
		}
		ord++
	}
	name := builders.MemberName(c, ord)
	if pod := s.pod(name); lostData(pod) != "" {
		// Its volume holds what is left of a removed member: clear it
		// first, or the new member would start on the old one's data.
		if err := p.r.wipeMember(ctx, s, pod); err != nil {
			return p.failed(err)
		}
		s.waitFor(dbv1.ReasonReplacingMember, fmt.Sprintf("replacing %s: deleted its pod and volume, so that it starts clean", name))
		return p.again(p.members)
	}
	if p.healthy < etcd.Quorum(p.voters) {
		return p.wait(dbv1.ReasonWaitingForQuorum, "adding %s: only %d of %d voters healthy, quorum is %d",
			name, p.healthy, p.voters, etcd.Quorum(p.voters))
	}
	var added etcd.Member
	if err := s.memberCall("adding learner "+name, func(cl etcd.Client) error {
		var err error
		added, err = cl.AddLearner(ctx, builders.PeerURL(c, name, p.r.Builders))
		return err
	}); err != nil {
		return p.failed(err)
	}
	s.step("added %s as a learner", name)
	members := append(p.members, member{Member: added, ordinal: ord, name: name})
	sort.Slice(members, func(i, j int) bool { return members[i].ordinal < members[j].ordinal })
	return p.again(members)
}
