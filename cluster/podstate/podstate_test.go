package podstate

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func pod(name string, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "op-system", Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "example.com/op:dev"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func waiting(reason, message string, restarts int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "manager", Image: "docker.io/example.com/op:dev", RestartCount: restarts,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	}
}

// Each state that waiting does not heal is a problem naming the
// container, the image the spec gives and what it means; a pod starting,
// running or being deleted is none.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{name: "crash loop", pod: pod("a", waiting("CrashLoopBackOff", "back-off 10s restarting failed container", 2)),
			want: "op-system/a container manager (image example.com/op:dev): CrashLoopBackOff, the container keeps crashing, 2 restarts: back-off 10s restarting failed container"},
		{name: "image never pulled", pod: pod("a", waiting("ErrImageNeverPull", `Container image "example.com/op:dev" is not present with pull policy of Never`, 0)),
			want: `op-system/a container manager (image example.com/op:dev): ErrImageNeverPull, the image is not on the node and its pull policy is Never: Container image "example.com/op:dev" is not present with pull policy of Never`},
		{name: "pull back-off", pod: pod("a", waiting("ImagePullBackOff", "Back-off pulling image", 0)),
			want: "op-system/a container manager (image example.com/op:dev): ImagePullBackOff, the image cannot be pulled: Back-off pulling image"},
		{name: "missing secret", pod: pod("a", waiting("CreateContainerConfigError", `secret "webhook-cert" not found`, 0)),
			want: `op-system/a container manager (image example.com/op:dev): CreateContainerConfigError, the container's configuration refers to something missing (a Secret, a ConfigMap, a key): secret "webhook-cert" not found`},
		{name: "unschedulable", pod: pod("a", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
		}), want: "op-system/a: Unschedulable, no node takes the pod: 0/1 nodes are available: 1 Insufficient cpu."},
		{name: "creating", pod: pod("a", waiting("ContainerCreating", "", 0))},
		{name: "running", pod: pod("a", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "manager", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		})},
		{name: "being deleted", pod: pod("a", func(p *corev1.Pod) {
			waiting("CrashLoopBackOff", "", 3)(p)
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Of(&tc.pod)
			if tc.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.String()).To(Equal(tc.want))
		})
	}
}

func event(kind, name, reason, message string, at time.Time) corev1.Event {
	return corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "op-system", Name: name + "." + reason},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}, Type: corev1.EventTypeWarning,
		Reason: reason, Message: message, LastTimestamp: metav1.Time{Time: at}}
}

// Events show what pod states do not: a volume that is not mounted, for a
// pod still starting, and a pod admission refused; an old mount failure of
// a pod that has since started (ready, or running but not yet ready: the
// kubelet's retry mounted it) is not a problem, nor is the kubelet's own
// cache not yet synced, which a retry mounts.
func TestFromEvents(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	starting := pod("starting", waiting("ContainerCreating", "", 0))
	started := pod("started", func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	running := pod("running", func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sentinel", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	})
	syncing := pod("syncing", waiting("ContainerCreating", "", 0))
	events := []corev1.Event{
		event("Pod", "syncing", "FailedMount", `MountVolume.SetUp failed for volume "sentinel-config" : failed to sync configmap cache: timed out waiting for the condition`, now),
		event("Pod", "running", "FailedMount", `MountVolume.SetUp failed for volume "sentinel-config" : failed to sync configmap cache: timed out waiting for the condition`, now.Add(-time.Second)),
		event("Pod", "starting", "FailedMount", `MountVolume.SetUp failed for volume "cert" : secret "webhook-server-cert" not found`, now.Add(-time.Second)),
		event("Pod", "starting", "FailedMount", `an older one`, now.Add(-time.Minute)),
		event("Pod", "started", "FailedMount", `MountVolume.SetUp failed for volume "cert"`, now.Add(-time.Minute)),
		event("ReplicaSet", "op-7f9", "FailedCreate", `pods "op-7f9-x" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`, now),
		event("ReplicaSet", "op-7f9", "FailedCreate", `Internal error occurred: failed calling webhook`, now),
	}
	var got []string
	for _, p := range FromEvents(events, []corev1.Pod{starting, started, running, syncing}) {
		got = append(got, p.String())
	}
	g.Expect(got).To(ConsistOf(
		`op-system/starting: FailedMount, a volume cannot be mounted: MountVolume.SetUp failed for volume "cert" : secret "webhook-server-cert" not found`,
		`op-system/ReplicaSet/op-7f9: FailedCreate, admission refused the pod: pods "op-7f9-x" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`,
	))
}

// A problem is stuck once it has lasted After; one that goes away starts
// again; an admission refusal is stuck at once.
func TestWatcher(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	w := &Watcher{After: 15 * time.Second, Now: func() time.Time { return now }}
	crashing := []corev1.Pod{pod("a", waiting("CrashLoopBackOff", "", 1))}
	running := []corev1.Pod{pod("a", nil)}

	g.Expect(w.Stuck(crashing, nil)).To(BeEmpty(), "just seen")
	now = now.Add(10 * time.Second)
	g.Expect(w.Stuck(running, nil)).To(BeEmpty(), "restarted: the first crash was transient")
	now = now.Add(time.Second)
	g.Expect(w.Stuck(crashing, nil)).To(BeEmpty(), "crashing again: counted from now")
	now = now.Add(14 * time.Second)
	g.Expect(w.Stuck(crashing, nil)).To(BeEmpty())
	now = now.Add(time.Second)
	stuck := w.Stuck(crashing, nil)
	g.Expect(stuck).To(HaveLen(1))
	g.Expect(stuck[0].Reason).To(Equal("CrashLoopBackOff"))
	g.Expect(stuck[0].For).To(Equal(15 * time.Second))

	g.Expect(w.Stuck([]corev1.Pod{pod("b", waiting("CrashLoopBackOff", "", 2))}, nil)).To(HaveLen(1),
		"a crash loop that crashed again after its first restart is stuck at once")

	refused := []corev1.Event{event("ReplicaSet", "op-7f9", "FailedCreate", `pods "x" is forbidden: exceeded quota`, now)}
	g.Expect(w.Stuck(nil, refused)).To(HaveLen(1), "a refused pod is never created: stuck at once")
}

// The evidence shows the pod's state, the crashed container's log tail
// and the pod's events.
func TestEvidence(t *testing.T) {
	g := NewWithT(t)
	p := pod("op-1", func(p *corev1.Pod) {
		waiting("CrashLoopBackOff", "back-off 20s", 2)(p)
		p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}
	})
	ev := event("Pod", "op-1", "BackOff", "Back-off restarting failed container manager", time.Now())
	cs := fake.NewClientset(&p, &ev)
	problem := Of(&p)
	out := Evidence(t.Context(), cs, []Lasting{{Problem: *problem, For: 16 * time.Second}})
	g.Expect(out).To(ContainSubstring("== op-system/op-1 container manager (image example.com/op:dev): CrashLoopBackOff"))
	g.Expect(out).To(ContainSubstring("(for 16s)"))
	g.Expect(out).To(ContainSubstring("container manager image example.com/op:dev ready=false restarts=2: waiting CrashLoopBackOff back-off 20s; last terminated: terminated Error exit code 1"))
	g.Expect(out).To(ContainSubstring("log of the crashed container (last 20 lines):\n  | fake logs"))
	g.Expect(out).To(ContainSubstring("events of Pod op-1:\n"))
	g.Expect(out).To(ContainSubstring("Warning BackOff: Back-off restarting failed container manager"))
}

// The guard ends a wait for pods that admission refuses to create, though
// no pod exists to select, and says which controller's pods and why.
func TestGuardSeesARefusal(t *testing.T) {
	g := NewWithT(t)
	ev := event("ReplicaSet", "op-7f9", "FailedCreate", `pods "op-7f9-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`, time.Now())
	guard := &Guard{Client: fake.NewClientset(&ev), Namespace: "op-system", Selector: map[string]string{"control-plane": "controller-manager"}, What: "the operator's pods"}
	err := guard.Check(t.Context())
	stuck := (*StuckError)(nil)
	g.Expect(errors.As(err, &stuck)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(Equal("the operator's pods will not become ready by waiting:\n" +
		`  op-system/ReplicaSet/op-7f9: FailedCreate, admission refused the pod: pods "op-7f9-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`))
	g.Expect(stuck.Evidence).To(ContainSubstring("events of ReplicaSet op-7f9:"))

	quiet := &Guard{Client: fake.NewClientset(), Namespace: "op-system", What: "the operator's pods"}
	g.Expect(quiet.Check(t.Context())).To(Succeed())
}

// A pull that fails alternates ErrImagePull and ImagePullBackOff: the
// time adds up across the two.
func TestWatcherAddsUpAlternatingReasons(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	w := &Watcher{After: 15 * time.Second, Now: func() time.Time { return now }}
	for i := range 3 {
		reason := []string{"ErrImagePull", "ImagePullBackOff"}[i%2]
		g.Expect(w.Stuck([]corev1.Pod{pod("a", waiting(reason, "", 0))}, nil)).To(BeEmpty(), "after %d looks", i)
		now = now.Add(5 * time.Second)
	}
	g.Expect(w.Stuck([]corev1.Pod{pod("a", waiting("ImagePullBackOff", "", 0))}, nil)).To(HaveLen(1), "15 s of one pull failing")
}

// A pod no node has the resources for says the cluster had no room, which
// other work on it may free; a pod no node accepts for another reason (a
// taint, a selector) and every other problem do not.
func TestNoRoom(t *testing.T) {
	g := NewWithT(t)
	unschedulable := func(msg string) Lasting {
		p := pod("db-0", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}
		})
		return Lasting{Problem: *Of(&p), For: StuckAfter}
	}
	crash := pod("db-1", waiting("CrashLoopBackOff", "back-off 10s", 3))
	crashing := Lasting{Problem: *Of(&crash), For: StuckAfter}
	full := "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."

	g.Expect((&StuckError{Problems: []Lasting{crashing, unschedulable(full)}}).NoRoom()).To(Equal(full))
	g.Expect((&StuckError{Problems: []Lasting{unschedulable("0/1 nodes are available: 1 node(s) had untolerated taint {gauntlet.dev/lost: }.")}}).NoRoom()).To(BeEmpty())
	g.Expect((&StuckError{Problems: []Lasting{crashing}}).NoRoom()).To(BeEmpty())
}

// A guard for images only ends a wait on an image that cannot be pulled,
// whatever else is wrong (a crash loop, an admission refusal may be a
// fault's doing and pass), and says which image.
func TestGuardForImagesOnly(t *testing.T) {
	g := NewWithT(t)
	crash := pod("db-0", waiting("CrashLoopBackOff", "back-off 10s", 3))
	pull := pod("db-1", waiting("ImagePullBackOff", `Back-off pulling image "redis:6.2.6-alpine"`, 0))
	pull.Spec.Containers[0].Image = "redis:6.2.6-alpine"
	refused := event("ReplicaSet", "op-7f9", "FailedCreate", `pods "op-7f9-x" is forbidden: exceeded quota`, time.Now())

	guard := &Guard{Client: fake.NewClientset(&crash, &refused), Namespace: "op-system", What: "the pods", ImagesOnly: true}
	g.Expect(guard.Check(t.Context())).To(Succeed(), "a crash loop and a refusal are not an image's")

	now := time.Now()
	guard = &Guard{Client: fake.NewClientset(&crash, &pull, &refused), Namespace: "op-system", What: "the pods", ImagesOnly: true}
	guard.watcher.Now = func() time.Time { return now }
	g.Expect(guard.Check(t.Context())).To(Succeed(), "not yet lasted")
	now = now.Add(StuckAfter)
	err := guard.Check(t.Context())
	stuck := (*StuckError)(nil)
	g.Expect(errors.As(err, &stuck)).To(BeTrue(), "got %v", err)
	g.Expect(stuck.Problems).To(HaveLen(1))
	g.Expect(stuck.Unpullable()).To(Equal(`redis:6.2.6-alpine: ImagePullBackOff: Back-off pulling image "redis:6.2.6-alpine"`))
	g.Expect((&StuckError{}).Unpullable()).To(BeEmpty())
}
