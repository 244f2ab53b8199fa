package install

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

func TestDeploymentReady(t *testing.T) {
	available := []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}
	tests := []struct {
		name   string
		gen    int64
		status appsv1.DeploymentStatus
		want   bool
	}{
		{"rolled out", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: available}, true},
		{"new generation not observed", 3, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: available}, false},
		{"old pod still there", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: available}, false},
		{"new pod not available", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 0, Conditions: available}, false},
		{"no Available condition", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: tt.gen}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}, Status: tt.status}
			ok, msg := deploymentReady(d)
			g.Expect(ok).To(Equal(tt.want))
			g.Expect(msg).To(ContainSubstring("deployment d: %d/1 available", tt.status.AvailableReplicas))
		})
	}
}

func TestDaemonSetReady(t *testing.T) {
	ready := func(n int32) appsv1.DaemonSetStatus {
		return appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: n, UpdatedNumberScheduled: n, NumberReady: n, NumberAvailable: n}
	}
	tests := []struct {
		name        string
		status      appsv1.DaemonSetStatus
		schedulable int
		want        bool
	}{
		{"ready on every node", ready(3), 3, true},
		{"runs on tainted nodes too", ready(4), 3, true},
		{"misses a schedulable node", ready(2), 3, false},
		{"nothing scheduled yet", ready(0), 0, false},
		{"one not ready", func() appsv1.DaemonSetStatus { s := ready(3); s.NumberReady = 2; return s }(), 3, false},
		{"rolling", func() appsv1.DaemonSetStatus { s := ready(3); s.UpdatedNumberScheduled = 1; return s }(), 3, false},
		{"unavailable", func() appsv1.DaemonSetStatus { s := ready(3); s.NumberUnavailable = 1; return s }(), 3, false},
		{"generation not observed", func() appsv1.DaemonSetStatus { s := ready(3); s.ObservedGeneration = 0; return s }(), 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Generation: 1}, Status: tt.status}
			ok, _ := daemonSetReady(ds, tt.schedulable)
			NewWithT(t).Expect(ok).To(Equal(tt.want))
		})
	}
}

func TestSchedulableNodes(t *testing.T) {
	node := func(ready bool, cordoned bool, taints ...corev1.Taint) corev1.Node {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return corev1.Node{
			Spec:   corev1.NodeSpec{Unschedulable: cordoned, Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
		}
	}
	g := NewWithT(t)
	g.Expect(schedulableNodes([]corev1.Node{
		node(true, false),
		node(true, false, corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}),
		node(true, false, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}),
		node(true, false, corev1.Taint{Key: "y", Effect: corev1.TaintEffectNoExecute}),
		node(true, true),
		node(false, false),
	})).To(Equal(2))
}

func TestDescribePods(t *testing.T) {
	g := NewWithT(t)
	g.Expect(describePods(nil)).To(Equal("no pods"))
	got := describePods([]corev1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "chaos-daemon-abc"},
			Spec:       corev1.PodSpec{NodeName: "kind-worker"},
			Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
				Name:  "chaos-daemon",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image not present"}},
			}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "chaos-controller-manager-xyz"},
			Status: corev1.PodStatus{
				Phase:      corev1.PodPending,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/1 nodes are available"}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "crashing"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "chaos-mesh", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}},
			}}},
		},
	})
	g.Expect(got).To(Equal("pod chaos-daemon-abc: Pending on kind-worker; container chaos-daemon ready=false restarts=0 waiting: ErrImageNeverPull image not present\n" +
		"pod chaos-controller-manager-xyz: Pending, unschedulable: 0/1 nodes are available\n" +
		"pod crashing: Running; container chaos-mesh ready=false restarts=3 waiting: CrashLoopBackOff  (last: Error exit 1)"))
}

func TestChanged(t *testing.T) {
	v := func(rv string, gen int64, meta string) version {
		return version{exists: true, resourceVersion: rv, generation: gen, meta: meta}
	}
	before := map[string]version{
		"Secret/ns/same":                        v("10", 0, ""),
		"Secret/ns/updated":                     v("10", 0, ""),
		"Secret/ns/new":                         {},
		"Deployment/ns/status":                  v("10", 2, "a=b"),
		"Deployment/ns/spec":                    v("10", 2, "a=b"),
		"Deployment/ns/labels":                  v("10", 2, "a=b"),
		"CustomResourceDefinition//established": v("5", 1, ""),
	}
	after := map[string]version{
		"Secret/ns/same":                        v("10", 0, ""),
		"Secret/ns/updated":                     v("11", 0, ""),
		"Secret/ns/new":                         v("12", 0, ""),
		"Deployment/ns/status":                  v("15", 2, "a=b"),
		"Deployment/ns/spec":                    v("15", 3, "a=b"),
		"Deployment/ns/labels":                  v("15", 2, "a=c"),
		"CustomResourceDefinition//established": v("6", 1, ""),
	}
	NewWithT(t).Expect(changed(before, after)).To(Equal([]string{
		"Deployment/ns/labels", "Deployment/ns/spec", "Secret/ns/new (created)", "Secret/ns/updated",
	}))
}

// TestVersions reads metadata only, and absent objects as absent.
func TestVersions(t *testing.T) {
	g := NewWithT(t)
	scheme, err := Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	existing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"x": "y"}}}
	c := framework.NewFakeClient(scheme, framework.FakeClientOptions{Objects: []client.Object{existing}})
	secret := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Secret")
		u.SetNamespace("ns")
		u.SetName(name)
		return u
	}
	got, err := versions(t.Context(), c, []*unstructured.Unstructured{secret("a"), secret("b")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got["Secret/ns/a"].exists).To(BeTrue())
	g.Expect(got["Secret/ns/a"].resourceVersion).NotTo(BeEmpty())
	g.Expect(got["Secret/ns/a"].meta).To(Equal("[x=y] []"))
	g.Expect(got["Secret/ns/b"]).To(Equal(version{}))
}

// TestWebhookProbe: the probe passes upstream's own defaulting and
// validation, so only an unreachable webhook can fail it.
func TestWebhookProbe(t *testing.T) {
	g := NewWithT(t)
	p := webhookProbe("chaos-mesh")
	g.Expect(p.Default(t.Context(), p)).To(Succeed())
	_, err := p.ValidateCreate(t.Context(), p)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestSettled(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string, terminating bool) client.Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "chaos-mesh", Labels: map[string]string{
			"app.kubernetes.io/name": "chaos-mesh", "app.kubernetes.io/component": "controller-manager",
		}}}
		if terminating {
			p.DeletionTimestamp = ptr.To(metav1.Now())
			p.Finalizers = []string{"test/keep"} // the fake client keeps deleted objects only with a finalizer
		}
		return p
	}
	tests := []struct {
		name  string
		pods  []client.Object
		ready bool
		want  bool
	}{
		{"ready, one pod", []client.Object{pod("new", false)}, true, true},
		{"ready, the old pod still terminating", []client.Object{pod("new", false), pod("old", true)}, true, false},
		{"not ready", []client.Object{pod("new", false)}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := framework.NewFakeClient(scheme, framework.FakeClientOptions{Objects: tt.pods})
			done, observed, err := settled(t.Context(), c, "chaos-mesh", "controller-manager", tt.ready, "status")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(done).To(Equal(tt.want))
			if !tt.want {
				g.Expect(observed).To(HavePrefix("status\npod new:"))
			}
		})
	}
}
