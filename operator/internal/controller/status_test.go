package controller

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

func members(healthy ...bool) []dbv1.MemberStatus {
	out := make([]dbv1.MemberStatus, len(healthy))
	for i, h := range healthy {
		out[i] = dbv1.MemberStatus{Name: "db-" + string(rune('0'+i)), Healthy: h}
	}
	return out
}

func settledSet(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 2, Replicas: replicas, ReadyReplicas: replicas, UpdatedReplicas: replicas,
			CurrentRevision: "r1", UpdateRevision: "r1",
		},
	}
}

var wasAvailable = []metav1.Condition{{Type: dbv1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: dbv1.ReasonQuorumHealthy}}

// wantCondition is a condition's expected status and reason.
type wantCondition struct{ status, reason string }

// conditionsCase is an observation and the three conditions it must give.
type conditionsCase struct {
	name                           string
	o                              observation
	available, progressing, degrad wantCondition
}

func TestComputeConditions(t *testing.T) {
	for _, tc := range append(lifecycleConditionsCases(), faultConditionsCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.o.generation = 7
			got := map[string]metav1.Condition{}
			for _, c := range computeConditions(tc.o) {
				got[c.Type] = c
			}
			for typ, w := range map[string]wantCondition{dbv1.ConditionAvailable: tc.available, dbv1.ConditionProgressing: tc.progressing, dbv1.ConditionDegraded: tc.degrad} {
				g.Expect(got).To(HaveKey(typ))
				g.Expect(string(got[typ].Status)).To(Equal(w.status), "%s: %+v", typ, got[typ])
				g.Expect(got[typ].Reason).To(Equal(w.reason), "%s: %+v", typ, got[typ])
			}
		})
	}
}

// lifecycleConditionsCases are a cluster's ordinary states: created,
// settled, scaling, rolling.
func lifecycleConditionsCases() []conditionsCase {
	return []conditionsCase{
		{
			name:        "healthy and settled",
			o:           observation{desired: 3, statefulSet: settledSet(3), membersObserved: true, members: members(true, true, true), previous: wasAvailable},
			available:   wantCondition{"True", dbv1.ReasonQuorumHealthy},
			progressing: wantCondition{"False", dbv1.ReasonReconciled},
			degrad:      wantCondition{"False", dbv1.ReasonAllMembersHealthy},
		},
		{
			// With OnDelete the StatefulSet controller never moves
			// currentRevision; found on kind by the e2e tier.
			name: "rolled: every pod updated, currentRevision left behind",
			o: func() observation {
				sts := settledSet(3)
				sts.Status.CurrentRevision, sts.Status.UpdateRevision = "r1", "r2"
				return observation{desired: 3, statefulSet: sts, membersObserved: true, members: members(true, true, true), previous: wasAvailable}
			}(),
			available:   wantCondition{"True", dbv1.ReasonQuorumHealthy},
			progressing: wantCondition{"False", dbv1.ReasonReconciled},
			degrad:      wantCondition{"False", dbv1.ReasonAllMembersHealthy},
		},
		{
			name:        "bootstrapping: no member ready yet",
			o:           observation{desired: 3, statefulSet: settledSet(3), membersObserved: true, members: members(false, false, false)},
			available:   wantCondition{"False", dbv1.ReasonBootstrapping},
			progressing: wantCondition{"True", dbv1.ReasonCreating},
			degrad:      wantCondition{"False", dbv1.ReasonBootstrapping},
		},
		{
			name: "scaling: spec replicas differ from status",
			o: func() observation {
				sts := settledSet(5)
				sts.Status.Replicas = 3
				return observation{desired: 5, statefulSet: sts, membersObserved: true, members: members(true, true, true), previous: wasAvailable}
			}(),
			available:   wantCondition{"True", dbv1.ReasonQuorumHealthy},
			progressing: wantCondition{"True", dbv1.ReasonScaling},
			degrad:      wantCondition{"False", dbv1.ReasonAllMembersHealthy},
		},
		{
			name: "rolling: not every pod runs the update revision",
			o: func() observation {
				sts := settledSet(3)
				sts.Status.UpdateRevision, sts.Status.UpdatedReplicas = "r2", 1
				return observation{desired: 3, statefulSet: sts, membersObserved: true, members: members(true, true, true), previous: wasAvailable}
			}(),
			available:   wantCondition{"True", dbv1.ReasonQuorumHealthy},
			progressing: wantCondition{"True", dbv1.ReasonRollingUpdate},
			degrad:      wantCondition{"False", dbv1.ReasonAllMembersHealthy},
		},
	}
}

// faultConditionsCases are a cluster with something wrong: quorum lost,
// the member API unreachable, an invalid spec, a failed final snapshot.
func faultConditionsCases() []conditionsCase {
	return []conditionsCase{
		{
			name:        "lost quorum after being available",
			o:           observation{desired: 3, statefulSet: settledSet(3), membersObserved: true, members: members(true, false, false), previous: wasAvailable},
			available:   wantCondition{"False", dbv1.ReasonQuorumLost},
			progressing: wantCondition{"False", dbv1.ReasonReconciled},
			degrad:      wantCondition{"True", dbv1.ReasonMembersUnhealthy},
		},
		{
			name:        "member API unreachable",
			o:           observation{desired: 3, statefulSet: settledSet(3), membersObserved: true, members: members(true, true, true), memberAPIErr: errors.New("dial timeout"), previous: wasAvailable},
			available:   wantCondition{"True", dbv1.ReasonQuorumHealthy},
			progressing: wantCondition{"False", dbv1.ReasonReconciled},
			degrad:      wantCondition{"True", dbv1.ReasonMemberAPIUnreachable},
		},
		{
			name:        "invalid spec keeps what was known",
			o:           observation{desired: 3, invalidSpec: errors.New("bad"), previous: wasAvailable},
			available:   wantCondition{"True", dbv1.ReasonQuorumHealthy},
			progressing: wantCondition{"False", dbv1.ReasonInvalidSpec},
			degrad:      wantCondition{"False", dbv1.ReasonBootstrapping},
		},
		{
			name:        "deleting with a failed snapshot",
			o:           observation{desired: 3, deleting: true, snapshotErr: errors.New("timeout"), previous: wasAvailable},
			available:   wantCondition{"True", dbv1.ReasonQuorumHealthy},
			progressing: wantCondition{"True", dbv1.ReasonDeleting},
			degrad:      wantCondition{"True", dbv1.ReasonSnapshotFailed},
		},
		{
			name:        "learners do not count toward quorum",
			o:           observation{desired: 3, statefulSet: settledSet(3), membersObserved: true, members: append(members(true, false, false), dbv1.MemberStatus{Name: "x", Healthy: true, Learner: true}), previous: wasAvailable},
			available:   wantCondition{"False", dbv1.ReasonQuorumLost},
			progressing: wantCondition{"False", dbv1.ReasonReconciled},
			degrad:      wantCondition{"True", dbv1.ReasonMembersUnhealthy},
		},
	}
}

func TestMergeMembers(t *testing.T) {
	g := NewWithT(t)
	c := &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: dbv1.DatabaseClusterSpec{Replicas: ptr.To[int32](3)}}
	o := builders.Options{}
	list := []etcd.Member{
		{ID: 1, Name: "db-0", Healthy: true, Leader: true},
		{ID: 2, Name: "db-1", Healthy: false},
		{ID: 3, PeerURLs: []string{builders.PeerURL(c, "db-2", o)}, IsLearner: true},
		{ID: 0xabc, Name: "old-member", Healthy: true},
	}
	ready := map[string]bool{"db-0": true, "db-1": true, "db-2": true}
	got := mergeMembers(c, ready, list, true, o)
	g.Expect(got).To(Equal([]dbv1.MemberStatus{
		{Name: "db-0", ID: "1", Healthy: true, Leader: true},
		{Name: "db-1", ID: "2", Healthy: false},
		{Name: "db-2", ID: "3", Healthy: false, Learner: true},
		{Name: "old-member", ID: "abc", Healthy: true},
	}))

	// Without the member API, pod readiness is all there is.
	g.Expect(mergeMembers(c, map[string]bool{"db-1": true}, nil, false, o)).To(Equal([]dbv1.MemberStatus{
		{Name: "db-0"}, {Name: "db-1", Healthy: true}, {Name: "db-2"},
	}))
}

func TestAnnouncedConditionsAnnounceEachFlipOnce(t *testing.T) {
	g := NewWithT(t)
	c := &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-1"}}
	cond := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason}
	}
	bootstrapping := cond(dbv1.ConditionAvailable, metav1.ConditionFalse, dbv1.ReasonBootstrapping)
	available := cond(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy)
	var a announcedConditions

	// A new cluster's first status is no news; a bad first status is.
	g.Expect(a.flipped(c, bootstrapping, nil)).To(BeFalse())
	g.Expect(a.flipped(c, cond(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonForeignChild), nil)).To(BeTrue())
	// The flip is announced once, even when a stale read still shows the old status.
	g.Expect(a.flipped(c, available, &bootstrapping)).To(BeTrue())
	g.Expect(a.flipped(c, available, nil)).To(BeFalse())
	g.Expect(a.flipped(c, available, &bootstrapping)).To(BeFalse())
	lost := cond(dbv1.ConditionAvailable, metav1.ConditionFalse, dbv1.ReasonQuorumLost)
	g.Expect(a.flipped(c, lost, &available)).To(BeTrue())

	// A fresh reconciler compares with the status it reads.
	var fresh announcedConditions
	g.Expect(fresh.flipped(c, available, &available)).To(BeFalse())
	g.Expect(fresh.flipped(c, lost, &available)).To(BeTrue())

	// A cluster recreated under the same name starts over; a forgotten one too.
	again := c.DeepCopy()
	again.UID = "uid-2"
	g.Expect(a.flipped(again, bootstrapping, nil)).To(BeFalse())
	g.Expect(a.flipped(again, available, nil)).To(BeTrue())
	a.forget(types.NamespacedName{Namespace: "ns", Name: "db"})
	g.Expect(a.flipped(again, available, nil)).To(BeFalse())
}
