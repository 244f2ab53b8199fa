package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// rollMembers replaces members whose pod runs an outdated template (the
// StatefulSet uses OnDelete, so nothing rolls unless the operator deletes a
// pod). One member at a time, only while every member is healthy and no
// membership change is in flight, followers before the leader: when only the
// leader is left, leadership moves to an updated member first. A cluster of
// one or two members tolerates no member down, so it is not rolled at all:
// Progressing says so, and scaling to three lets the upgrade proceed.
// Rule: rollout-on-delete
// Rule: rollout-one-at-a-time
// Rule: rollout-only-when-healthy
// Rule: rollout-followers-first
// Rule: rollout-leader-hands-over
// Rule: small-cluster-not-rolled
// Rule: small-cluster-says-why
// (Each "Rule:" line names a rule that a simulation invariant checks; see
// suites/reference/rules.go.)
func (r *Reconciler) rollMembers(ctx context.Context, s *scope) (ctrl.Result, error) {
	sts := s.statefulSet
	if sts == nil || s.progressMessage != "" {
		return ctrl.Result{}, nil // nothing to roll, or a membership step is under way
	}
	if s.statefulSetChanged || sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "" {
		return ctrl.Result{}, nil // the StatefulSet controller has not computed the new revision yet; its status update wakes us
	}
	var outdated []corev1.Pod
	for _, p := range s.pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != sts.Status.UpdateRevision {
			outdated = append(outdated, p)
		}
	}
	if len(outdated) == 0 {
		return ctrl.Result{}, nil
	}
	c := s.cluster
	total := int(s.replicas)
	done := total - len(outdated)
	for _, m := range s.members {
		if !m.Healthy || m.Learner {
			why := ""
			if t := podTrouble(s.pods, m.Name); t != "" {
				why = ": " + t
			}
			s.waitFor(dbv1.ReasonRollingUpdate, fmt.Sprintf("rolling update paused at %d of %d members: %s is not healthy%s", done, total, m.Name, why))
			return ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
		}
	}
	if len(s.pods) != total || len(s.members) != total {
		s.waitFor(dbv1.ReasonRollingUpdate, fmt.Sprintf("rolling update paused at %d of %d members: waiting for every member to be present", done, total))
		return ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
	}

	if voters := len(s.members); etcd.FaultTolerance(voters) == 0 {
		s.waitFor(dbv1.ReasonWaitingForQuorum, fmt.Sprintf(
			"rolling update (to the new spec.image or spec.resources) paused at %d of %d members: a %d-member cluster tolerates no member down, so replacing one would lose quorum; set spec.replicas to 3 or more to roll it without an outage",
			done, total, voters))
		return ctrl.Result{}, nil
	}
	leader := ""
	for _, m := range s.members {
		if m.Leader {
			leader = m.Name
		}
	}
	// Followers first, highest ordinal first; the leader last.
	// Rule: rollout-followers-first
	sort.Slice(outdated, func(i, j int) bool {
		if (outdated[i].Name == leader) != (outdated[j].Name == leader) {
			return outdated[j].Name == leader
		}
		return ordinalOf(c, outdated[i].Name) > ordinalOf(c, outdated[j].Name)
	})
	target := outdated[0]
	if target.Name == leader && s.membersFromAPI {
		to := r.updatedVoter(s, sts.Status.UpdateRevision)
		if to == nil {
			s.waitFor(dbv1.ReasonRollingUpdate, fmt.Sprintf("rolling update paused at %d of %d members: no updated member to hand leadership to", done, total))
			return ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
		}
		err := s.memberCall("moving leadership to "+to.Name, func(cl etcd.Client) error { return cl.MoveLeader(ctx, to.ID) })
		switch {
		case errors.Is(err, etcd.ErrClusterNotReady):
			s.waitFor(dbv1.ReasonRollingUpdate, fmt.Sprintf("rolling update paused at %d of %d members: %v", done, total, err))
			return ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
		case err != nil:
			return ctrl.Result{}, err
		}
		s.waitFor(dbv1.ReasonRollingUpdate, fmt.Sprintf("upgrading members: moved leadership from %s to %s before upgrading it (%d of %d updated)", leader, to.Name, done, total))
		return ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
	}
	if err := r.Client.Delete(ctx, &target, client.Preconditions{UID: &target.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("replacing member pod %s: %w", target.Name, err)
	}
	s.waitFor(dbv1.ReasonRollingUpdate, fmt.Sprintf("upgrading member %s to %s (%d of %d updated)", target.Name, c.Spec.Image, done, total))
	return ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
}

// updatedVoter is a healthy voting member whose pod runs the update
// revision, preferring the lowest ordinal.
func (r *Reconciler) updatedVoter(s *scope, revision string) *etcd.Member {
	updated := map[string]bool{}
	for _, p := range s.pods {
		updated[p.Name] = p.Labels[appsv1.ControllerRevisionHashLabelKey] == revision
	}
	var best *etcd.Member
	for i, m := range s.apiMembers {
		if m.IsLearner || !m.Healthy || m.Leader || !updated[m.Name] {
			continue
		}
		if best == nil || ordinalOf(s.cluster, m.Name) < ordinalOf(s.cluster, best.Name) {
			best = &s.apiMembers[i]
		}
	}
	return best
}
