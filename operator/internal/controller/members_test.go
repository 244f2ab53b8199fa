package controller

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
)

func TestDegradedRecheck(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	degradedFor := func(d time.Duration) []metav1.Condition {
		return []metav1.Condition{{Type: dbv1.ConditionDegraded, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-d))}}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  time.Duration
	}{
		{"not yet Degraded: the member just went", nil, DegradedFastRecheck},
		{"Degraded=False still recorded", []metav1.Condition{{Type: dbv1.ConditionDegraded, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}, DegradedFastRecheck},
		{"Degraded for 5s", degradedFor(5 * time.Second), DegradedFastRecheck},
		{"Degraded just under the window", degradedFor(DegradedFastWindow - time.Second), DegradedFastRecheck},
		{"Degraded for the whole window", degradedFor(DegradedFastWindow), DegradedRecheckInterval},
		{"Degraded for an hour", degradedFor(time.Hour), DegradedRecheckInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(degradedRecheck(tc.conds, now)).To(Equal(tc.want))
		})
	}
}

func TestObserveMembersWithoutAPIWaitsForALaggingPodCache(t *testing.T) {
	pod := func(name string, ready bool) corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	for _, tc := range []struct {
		name       string
		stsReady   int32
		readyPods  int
		noSet      bool
		wantResult ctrl.Result
	}{
		{"the cache shows what the StatefulSet counts", 3, 3, false, ctrl.Result{}},
		{"pods still starting", 1, 1, false, ctrl.Result{}},
		{"the StatefulSet counts more ready pods than the cache shows", 3, 1, false, ctrl.Result{RequeueAfter: PodCacheLagRecheck}},
		{"no StatefulSet yet", 0, 0, true, ctrl.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: dbv1.DatabaseClusterSpec{Replicas: ptr.To[int32](3)}}
			s := newScope(c)
			if !tc.noSet {
				s.statefulSet = &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{ReadyReplicas: tc.stsReady}}
			}
			for i := range 3 {
				s.pods = append(s.pods, pod(fmt.Sprintf("db-%d", i), i < tc.readyPods))
			}
			res, err := (&Reconciler{}).observeMembers(t.Context(), s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(tc.wantResult))
			g.Expect(s.membersObserved).To(BeTrue())
		})
	}
}

func TestMemberEndpointIsThePodsCurrentAddress(t *testing.T) {
	g := NewWithT(t)
	c := &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1"}}
	g.Expect(memberEndpoint(c, p, builders.Options{})).To(Equal(builders.ClientURL(c, "db-1", builders.Options{})), "no address yet: the member's DNS name")
	p.Status.PodIP = "10.244.2.7"
	g.Expect(memberEndpoint(c, p, builders.Options{})).To(Equal("http://10.244.2.7:2379"), "the pod's IP, which no DNS cache can hold stale")
	p.Status.PodIP = "fd00::7"
	g.Expect(memberEndpoint(c, p, builders.Options{})).To(Equal("http://[fd00::7]:2379"))
}

// A member that cannot pull its image says which and names spec.image; a
// crashing one says so; one merely starting says nothing.
func TestPodTrouble(t *testing.T) {
	g := NewWithT(t)
	waiting := func(name, reason string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", Image: "explore",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
		return p
	}
	pods := []corev1.Pod{waiting("db-0", "ContainerCreating"), waiting("db-1", "ImagePullBackOff"), waiting("db-2", "CrashLoopBackOff")}
	g.Expect(podTrouble(pods, "db-1")).To(Equal(`its container etcd cannot pull image "explore" (ImagePullBackOff); check spec.image`))
	g.Expect(podTrouble(pods, "db-2")).To(Equal("its container etcd is in CrashLoopBackOff"))
	g.Expect(podTrouble(pods, "db-0")).To(BeEmpty(), "starting")
	g.Expect(podTrouble(pods, "db-3")).To(BeEmpty(), "not there")
}
