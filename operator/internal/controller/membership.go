package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// Membership changes go through etcd's own API, one per pass, and only when
// the cluster keeps a quorum of healthy voters through the change:
// Rule: membership-one-change-per-pass
// Rule: membership-keeps-quorum
//
//	step                     voters after   must hold before the step
//	add learner              V              healthy >= quorum(V)
//	promote learner L        V+1            L healthy, healthy+1 >= quorum(V+1)
//	remove voter X           V-1            healthy - (X healthy) >= quorum(V-1)
//	remove learner           V              nothing (a learner does not vote)
//	move leader to Y         V              Y a healthy voter
//	replace pod (upgrade)    V              every member healthy, none pending
//
// Rule: membership-quorum-table
// Rule: membership-leader-to-healthy-voter
// Rule: rollout-only-when-healthy
//
// quorum(V) = V/2+1 (see etcd.Quorum for the tolerance table). Every change
// to the voters (promote, remove) also needs healthy >= quorum(V) before it:
// without that there is no leader to commit it and etcd refuses it (with an
// even V the rules above alone would let one through: 2 of 4 healthy, an
// unhealthy member removed). A step whose rule does not hold is not taken:
// the pass requeues and Progressing says why. The StatefulSet follows the
// membership: it has one pod per member ordinal, so it grows only after a
// learner is registered and shrinks only after the member is gone.
// Rule: membership-wait-says-why
// Rule: membership-statefulset-follows
//
// Each "Rule:" line names a rule of suites/reference.DocumentedRules, which a
// simulation invariant checks after every step.

// Requeue intervals of membership changes, which no watch reports.
const (
	// MembershipRecheckInterval comes back while a change waits on etcd (a
	// learner catching up, a leader moving, a member starting).
	MembershipRecheckInterval = 2 * time.Second
)

// member is one etcd member with the ordinal of the pod that runs it.
type member struct {
	etcd.Member
	ordinal int
	// name is the pod name: etcd's name once started, or the one whose peer
	// URL a learner was registered with.
	name string
}

// readMembersConfig reads the members ConfigMap: whether the cluster has
// bootstrapped, and with which members.
func (r *Reconciler) readMembersConfig(ctx context.Context, s *scope) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: builders.MembersConfigMapName(s.cluster)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the members ConfigMap: %w", err)
	}
	s.configState = cm.Data[builders.EnvInitialClusterState]
	s.configMembers = builders.InitialClusterMembers(cm.Data[builders.EnvInitialCluster])
	return ctrl.Result{}, nil
}

// readMembers reads the StatefulSet and its pods, then the members through
// etcd's API.
func (r *Reconciler) readMembers(ctx context.Context, s *scope) (ctrl.Result, error) {
	sts := &appsv1.StatefulSet{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: builders.StatefulSetName(s.cluster)}, sts); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the StatefulSet: %w", err)
	default:
		s.statefulSet = sts
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.cluster.Namespace),
		client.MatchingFields{PodsByCluster: s.cluster.Name}, client.MatchingLabels(builders.SelectorLabels(s.cluster))); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing member pods: %w", err)
	}
	s.pods = pods.Items
	return r.observeMembers(ctx, s)
}

// reconcileMembership takes at most one membership step toward the spec,
// then writes the members ConfigMap and decides the StatefulSet's size.
func (r *Reconciler) reconcileMembership(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	desired := int(c.DesiredReplicas())
	state := builders.ClusterStateExisting
	var names []string
	var res ctrl.Result

	switch {
	case s.configState != builders.ClusterStateExisting:
		// Bootstrap: every initial member starts at once with state "new".
		names = s.configMembers
		if len(names) == 0 {
			names = builders.MemberNames(c, desired)
		}
		state = builders.ClusterStateNew
		s.bootstrapMembers = names
		if s.bootstrapQuorum(len(names)) {
			// Formed: from now on a starting member joins an existing cluster.
			state = builders.ClusterStateExisting
		}
		s.replicas = int32(len(names))
	case r.Dialer == nil:
		// Without etcd's API nothing can be asked of the membership: the
		// operator only sizes the StatefulSet (a configuration for tests
		// that have no etcd; production always has the API).
		names = builders.MemberNames(c, desired)
		s.replicas = int32(desired)
	case !s.membersFromAPI:
		// Keep everything as it is until etcd answers.
		names = s.configMembers
		s.replicas = int32(len(names))
		if s.statefulSet != nil && s.statefulSet.Spec.Replicas != nil {
			s.replicas = *s.statefulSet.Spec.Replicas
		}
		if len(names) != desired {
			s.waitFor(dbv1.ReasonScaling, "cannot change membership: etcd's member API is unreachable")
		}
		return ctrl.Result{RequeueAfter: MembershipRecheckInterval}, nil
	default:
		members := s.classifyMembers(r.Builders)
		var err error
		members, res, err = r.membershipStep(ctx, s, members, desired)
		switch {
		case errors.Is(err, etcd.ErrClusterNotReady):
			// A member joined moments ago; etcd accepts the change shortly.
			s.waitFor(dbv1.ReasonScaling, "waiting for etcd to accept the next membership change: "+err.Error())
			res = ctrl.Result{RequeueAfter: MembershipRecheckInterval}
		case err != nil:
			return res, err
		}
		// One pod per member ordinal; the StatefulSet shrinks only past
		// the spec (a scale-down), never under a member being replaced.
		top := -1
		for _, m := range members {
			names = append(names, m.name)
			top = max(top, m.ordinal)
		}
		current := 0
		if s.statefulSet != nil && s.statefulSet.Spec.Replicas != nil {
			current = int(*s.statefulSet.Spec.Replicas)
		}
		s.replicas = int32(max(top+1, min(desired, current)))
	}
	sort.Slice(names, func(i, j int) bool { return ordinalOf(c, names[i]) < ordinalOf(c, names[j]) })
	if err := r.applyMembersConfig(ctx, s, state, names); err != nil {
		return s.childError(err)
	}
	return res, nil
}

func ordinalOf(c *dbv1.DatabaseCluster, name string) int {
	if o, ok := builders.MemberOrdinal(c, name); ok {
		return o
	}
	return 1 << 30
}

func (r *Reconciler) applyMembersConfig(ctx context.Context, s *scope, state string, names []string) error {
	desired := builders.MembersConfigMap(s.cluster, state, names, r.Builders)
	existing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: s.cluster.Namespace}}
	_, err := applyChild(ctx, r.Client, &r.applied, s.cluster, "ConfigMap", existing, desired, corev1ac.ExtractConfigMap)
	return err
}

// bootstrapQuorum tells whether the bootstrap members have formed a cluster:
// a quorum of them healthy in etcd's eyes, or ready when there is no API.
func (s *scope) bootstrapQuorum(bootstrap int) bool {
	if s.membersFromAPI {
		q := quorumOf(s.members, true)
		return q.voters > 0 && q.healthyVoters >= etcd.Quorum(q.voters)
	}
	ready := 0
	for _, m := range s.members {
		if m.Healthy {
			ready++
		}
	}
	return ready >= etcd.Quorum(bootstrap)
}

// classifyMembers pairs each etcd member with its pod ordinal, by name or,
// for a learner whose process has not started, by peer URL. Members that
// belong to no pod of this cluster are left out of the plan (they still
// count in the quorum arithmetic through status).
func (s *scope) classifyMembers(o builders.Options) []member {
	c := s.cluster
	var out []member
	for _, m := range s.apiMembers {
		name := m.Name
		if _, ok := builders.MemberOrdinal(c, name); !ok {
			name = ""
			for i := range maxOrdinals {
				candidate := builders.MemberName(c, i)
				if slices.Contains(m.PeerURLs, builders.PeerURL(c, candidate, o)) {
					name = candidate
					break
				}
			}
		}
		if ord, ok := builders.MemberOrdinal(c, name); ok {
			out = append(out, member{Member: m, ordinal: ord, name: name})
		} else {
			s.foreignMembers = append(s.foreignMembers, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ordinal < out[j].ordinal })
	return out
}

// maxOrdinals bounds the peer-URL search: the spec allows at most 9 members,
// and a scale-down leaves at most a few more behind.
const maxOrdinals = 32

// memberCall runs one mutating call on etcd's API. A failure ends the pass
// with an error (retried with backoff) and is shown in status.
// etcd refusing a change because the cluster is not ready for one comes back
// as etcd.ErrClusterNotReady, which the callers turn into a wait.
// It uses the client the pass listed the members with.
func (s *scope) memberCall(what string, call func(etcd.Client) error) error {
	if s.etcd == nil {
		return fmt.Errorf("%s: no connection to etcd in this pass", what)
	}
	if err := call(s.etcd); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// waitFor records why the pass could not take its next step.
func (s *scope) waitFor(reason, msg string) {
	s.progressReason, s.progressMessage = reason, msg
}

// step records the membership step this pass took.
func (s *scope) step(format string, args ...any) {
	s.progressReason, s.progressMessage = dbv1.ReasonScaling, fmt.Sprintf(format, args...)
}

// Last words of etcd processes that can never start as the member they
// were: the kubelet keeps them as the container's termination message
// (FallbackToLogsOnError).
var lostDataSignatures = []struct{ text, why string }{
	{"raft log corrupted, truncated, or lost", "its raft log is gone"},
	{"has been permanently removed from the cluster", "its data belongs to a removed member"},
	{"has already been bootstrapped", "it tried to bootstrap an existing cluster"},
}

// lostData says why the pod's etcd can never start as the member it was,
// from the container's last termination message, or "" if nothing says so.
func lostData(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	for _, cs := range p.Status.ContainerStatuses {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil {
				continue
			}
			for _, sig := range lostDataSignatures {
				if strings.Contains(t.Message, sig.text) {
					return sig.why
				}
			}
		}
	}
	return ""
}

func (s *scope) pod(name string) *corev1.Pod {
	for i := range s.pods {
		if s.pods[i].Name == name {
			return &s.pods[i]
		}
	}
	return nil
}

// wipeMember deletes a member's volume claim, then its pod: the
// StatefulSet controller recreates both, the claim empty.
func (r *Reconciler) wipeMember(ctx context.Context, s *scope, pod *corev1.Pod) error {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: pod.Namespace, Name: builders.DataClaimName(pod.Name),
	}}
	if err := r.Client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the volume claim of %s: %w", pod.Name, err)
	}
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	return nil
}
