package engine

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/timeline"
	"github.com/gauntlet-dev/gauntlet/framework"
)

func TestNeeds(t *testing.T) {
	g := NewWithT(t)
	g.Expect(needs(scenario.ActionPartition)).To(Equal([]chaosmesh.Feature{chaosmesh.IPSet}))
	g.Expect(needs(scenario.ActionDelay)).To(Equal([]chaosmesh.Feature{chaosmesh.Netem}))
	g.Expect(needs(scenario.ActionPodKill)).To(BeEmpty())
	g.Expect(needs(scenario.ActionBandwidth)).To(Equal([]chaosmesh.Feature{chaosmesh.TBF}))
	g.Expect(needs(scenario.ActionLoss)).To(Equal([]chaosmesh.Feature{chaosmesh.Netem}))
}

func TestRestarts(t *testing.T) {
	g := NewWithT(t)
	before := operatorState{uids: map[string]int32{"a": 1}}
	g.Expect(restarts(before, operatorState{uids: map[string]int32{"a": 1}})).To(Equal(0))
	g.Expect(restarts(before, operatorState{uids: map[string]int32{"a": 3}})).To(Equal(2), "two container restarts")
	g.Expect(restarts(before, operatorState{uids: map[string]int32{"b": 1}})).To(Equal(2), "a new pod, restarted once")
}

func object(replicas, ready int64, conds ...string) *unstructured.Unstructured {
	var cs []any
	for i := 0; i+1 < len(conds); i += 2 {
		cs = append(cs, map[string]any{"type": conds[i], "status": conds[i+1], "reason": "R"})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"spec":   map[string]any{"replicas": replicas},
		"status": map[string]any{"readyReplicas": ready, "conditions": cs},
	}}
}

func TestCELOverTheTimeline(t *testing.T) {
	g := NewWithT(t)
	ps, err := compile([]string{"self.status.readyReplicas == self.spec.replicas"})
	g.Expect(err).NotTo(HaveOccurred())
	p := ps[0]
	ok, err := p.eval(object(3, 3).Object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	_, err = p.eval(map[string]any{"spec": map[string]any{}})
	g.Expect(err).To(HaveOccurred(), "a field not there yet is an error, counted as false")
	_, err = compile([]string{"self.status.("})
	g.Expect(err).To(MatchError(ContainSubstring("CEL")))

	tl := timeline.New()
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tl.Record(at(0), object(3, 3, "Available", "True"))
	mid := at(5)
	tl.Record(at(10), object(3, 2, "Available", "True"))
	tl.Record(at(15), object(3, 3, "Available", "True"))
	end := at(20)

	first, ok := firstCEL(tl, p, true, t0.Add(-time.Second))
	g.Expect(ok).To(BeTrue())
	g.Expect(first).To(Equal(t0), "nothing was in force before the first version")
	first, ok = firstCEL(tl, p, false, mid)
	g.Expect(ok).To(BeTrue())
	g.Expect(first).To(Equal(at(10)), "the first version where it failed")
	g.Expect(everCEL(tl, p, false, t0, end)).To(BeTrue())
	g.Expect(everCEL(tl, p, false, t0, mid)).To(BeFalse())
	_, ok = firstCEL(tl, p, false, end.Add(time.Second))
	g.Expect(ok).To(BeFalse(), "in force at the end: true")
}

func pod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, UID: types.UID(name)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func TestRoles(t *testing.T) {
	member := map[string]string{"app": "db"}
	objs := []client.Object{
		pod("ns", "db-0", member), pod("ns", "db-1", member), pod("ns", "db-2", member), pod("ns", "other", nil),
		pod("op", "manager-abc", map[string]string{"control-plane": "controller-manager"}),
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	e := &Engine{Client: c, operator: &scenario.OperatorSpec{Namespace: "op", Selector: map[string]string{"control-plane": "controller-manager"}}}
	defs := map[string]scenario.Role{
		"members":  {Pods: member},
		"leader":   {From: "members", Pick: "one"},
		"rest":     {From: "members", Exclude: []string{"leader"}},
		"minority": {From: "members", Exclude: []string{"leader"}, Pick: "minority"},
		"two":      {From: "members", Pick: "2"},
		"operator": {Operator: true},
		"api":      {APIServer: true},
		"none":     {Pods: map[string]string{"app": "nothing"}},
	}
	cases := []struct {
		role  string
		count int
		ns    string
		err   string
	}{
		{"members", 3, "ns", ""},
		{"leader", 1, "ns", ""},
		{"rest", 2, "ns", ""},
		{"minority", 1, "ns", ""},
		{"two", 2, "ns", ""},
		{"operator", 1, "op", ""},
		{"api", 0, "", "the API server's addresses"},
		{"none", 0, "", "role none: no pod in ns has the labels app=nothing (its pods: db-0: app=db; db-1: app=db; db-2: app=db; other: )"},
		{"missing", 0, "", `no role "missing"`},
	}
	for _, tc := range cases {
		t.Run(tc.role, func(t *testing.T) {
			g := NewWithT(t)
			r := &roles{e: e, namespace: "ns", defs: defs, rng: rand.New(rand.NewPCG(1, 2))}
			got, err := r.pods(t.Context(), tc.role)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Names).To(HaveLen(tc.count))
			g.Expect(got.Namespace).To(Equal(tc.ns))
		})
	}

	// The same seed picks the same pods; within one resolution a picked
	// role is the same wherever it is named.
	g := NewWithT(t)
	r := &roles{e: e, namespace: "ns", defs: defs, rng: rand.New(rand.NewPCG(3, 2))}
	for range 10 {
		snap := r.snapshot()
		leader, err := snap.pods(t.Context(), "leader")
		g.Expect(err).NotTo(HaveOccurred())
		rest, err := snap.pods(t.Context(), "rest")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rest.Names).NotTo(ContainElement(leader.Names[0]))
	}
	pick := func(seed uint64) []string {
		r := &roles{e: e, namespace: "ns", defs: defs, rng: rand.New(rand.NewPCG(seed, 2))}
		p, err := r.pods(t.Context(), "minority")
		g.Expect(err).NotTo(HaveOccurred())
		return p.Names
	}
	g.Expect(pick(7)).To(Equal(pick(7)))
}

func TestBuildPartition(t *testing.T) {
	g := NewWithT(t)
	f := scenario.Fault{Action: scenario.ActionPartition}
	target, peer := chaosmesh.Pods{Namespace: "ns", Names: []string{"db-0"}}, chaosmesh.Pods{Namespace: "ns", Names: []string{"db-1", "db-2"}}
	exp, err := build("p", f, target, peer, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exp.Targets).To(HaveLen(2), "cut off from the peer's pods")
	exp, err = build("p", f, target, chaosmesh.Pods{}, []string{"10.96.0.1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exp.Targets).To(HaveLen(1), "cut off from addresses: only the target is a pod")
	_, err = build("p", scenario.Fault{Action: "explode"}, target, peer, nil)
	g.Expect(err).To(MatchError(ContainSubstring(`unknown action "explode"`)))
}

func TestConditionTimedFromAnotherCondition(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tl := timeline.New()
	tl.Record(at(0), object(3, 3, "Available", "True"))
	tl.Record(at(2), object(3, 2, "Available", "False"))
	tl.Record(at(9), object(3, 3, "Available", "True"))
	r := &run{res: &report.Result{Run: &report.Run{Phases: report.Phases{Requested: at(1), Injected: at(1), Healed: at(21)}}}}
	from := map[string]time.Time{scenario.FromRequested: at(1), scenario.FromInjected: at(1), scenario.FromHealed: at(21)}
	recovery := func(within time.Duration) scenario.ConditionAssertion {
		return scenario.ConditionAssertion{Type: "Available", Status: "True", Within: metav1.Duration{Duration: within}, After: "Available=False"}
	}

	c, err := r.conditionCheck(tl, recovery(10*time.Second), from)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Value).To(Equal("7s"), "from the loss at 2s to the return at 9s, not from the request (already True then)")
	g.Expect(c.Violation).To(BeEmpty())

	c, err = r.conditionCheck(tl, recovery(5*time.Second), from)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Violation).To(ContainSubstring("7s after Available=False, over the budget of 5s"))

	never := scenario.ConditionAssertion{Type: "Available", Status: "True", Within: metav1.Duration{Duration: time.Minute}, After: "Degraded=True"}
	c, err = r.conditionCheck(tl, never, from)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Violation).To(Equal("Degraded=True never happened after the request, so Available=True cannot be timed from it"))
}

func TestCommandResult(t *testing.T) {
	g := NewWithT(t)
	ok := commandResult{pod: "ns/p-1", out: framework.ExecResult{Stdout: "warming\n212 round trips\n\n"}}.check("")
	g.Expect(ok.Value).To(Equal("exit 0: 212 round trips"))
	g.Expect(ok.Name).To(Equal("workload command in ns/p-1"))
	g.Expect(ok.Violation).To(BeEmpty())

	dir := t.TempDir()
	summary := "271 writes, 5 failed (the master gone), 266 acknowledged, 2 of them not on the final master: k-17, k-18 " + strings.Repeat("(detail) ", 12)
	bad := commandResult{pod: "ns/p-1", out: framework.ExecResult{Stdout: "writing\n" + summary, Stderr: "lost k-17\n"},
		err: errors.New("exit status 1: lost k-17")}.check(dir)
	g.Expect(bad.Violation).To(Equal("the workload command failed: exit status 1: lost k-17; its last output: "+strings.TrimSpace(summary)+
		" (its whole output: "+filepath.Join(dir, commandOutputFile)+")"), "a summary of 200 characters is shown whole")
	saved, err := os.ReadFile(filepath.Join(dir, commandOutputFile))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(saved)).To(Equal("# ns/p-1\n## stdout\nwriting\n" + summary + "\n## stderr\nlost k-17\n\n"))
	g.Expect(lastLine(strings.Repeat("x", 200), 10)).To(Equal("xxxxxxxxxx…"))
	g.Expect(lastLine("", 10)).To(BeEmpty())
	g.Expect(firstLine("bash -c n=0\nwhile true", 60)).To(Equal("bash -c n=0 …"))
	g.Expect(firstLine("bash -c n=0\nwhile true", 13)).To(Equal("bash -c n=0 …"), "13 characters, 15 bytes: the marker is not cut in two")
	g.Expect(cut("naïve…x", 6)).To(Equal("naïve……"))
}

func TestRecoveredAt(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	healed := at(10)
	targets := []chaosmesh.Pods{{Namespace: "db", Names: []string{"db-0", "db-1"}}}
	ev := func(s int, pod, what string) report.PodEvent {
		return report.PodEvent{At: at(s), Pod: "db/" + pod, Event: what}
	}

	got, ok := recoveredAt(nil, targets, healed)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal(healed), "never unready: recovered at the heal")

	events := []report.PodEvent{
		ev(2, "db-0", report.PodDeleted), ev(2, "db-0", report.PodCreated), ev(13, "db-0", report.PodReady),
		ev(3, "db-1", report.PodNotReady), ev(8, "db-1", report.PodReady),
		ev(4, "db-2", report.PodNotReady), // not a target
	}
	got, ok = recoveredAt(events, targets, healed)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal(at(13)), "the replacement of db-0 ready at 13; db-1 was ready before the heal")

	got, ok = recoveredAt(append(events, ev(15, "db-1", report.PodNotReady), ev(17, "db-1", report.PodReady)), targets, healed)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal(at(17)), "ready for good: a later flap moves the moment")

	_, ok = recoveredAt(events[:2], targets, healed)
	g.Expect(ok).To(BeFalse(), "db-0's replacement never ready")
}

// controlledBy makes obj a controlled dependent of owner.
func controlledBy(obj, owner client.Object, kind string) client.Object {
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}})
	return obj
}

// An owned role picks the pods whose controller references lead to the
// resource under test, through Deployments, ReplicaSets and StatefulSets,
// and none other; with none, it says so.
func TestOwnedRole(t *testing.T) {
	g := NewWithT(t)
	resource := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "res"}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "web"}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "web-1"}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "db"}}
	strayRS := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stray", UID: "stray"}}
	objs := []client.Object{
		controlledBy(deploy, resource, "Memcached"), controlledBy(rs, deploy, "Deployment"), controlledBy(sts, resource, "Memcached"), strayRS,
		controlledBy(pod("ns", "web-1-a", nil), rs, "ReplicaSet"), controlledBy(pod("ns", "web-1-b", nil), rs, "ReplicaSet"),
		controlledBy(pod("ns", "db-0", nil), sts, "StatefulSet"),
		controlledBy(pod("ns", "stray-a", nil), strayRS, "ReplicaSet"), pod("ns", "bare", nil),
		controlledBy(pod("ns", "orphan", nil), &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: "gone"}}, "ReplicaSet"),
	}
	e := &Engine{Client: fake.NewClientBuilder().WithObjects(objs...).Build()}
	defs := map[string]scenario.Role{"owned": {Owned: true}, "one": {From: "owned", Pick: "one"}}
	r := &roles{e: e, namespace: "ns", defs: defs, rng: rand.New(rand.NewPCG(1, 2)), owner: resource}
	got, err := r.pods(t.Context(), "owned")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(chaosmesh.Pods{Namespace: "ns", Names: []string{"db-0", "web-1-a", "web-1-b"}}))
	one, err := r.pods(t.Context(), "one")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one.Names).To(HaveLen(1))

	none := &roles{e: e, namespace: "ns", defs: defs, rng: rand.New(rand.NewPCG(1, 2)), owner: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "x"}}}
	_, err = none.pods(t.Context(), "owned")
	g.Expect(err).To(MatchError("role owned: no pod in ns is owned by the resource under test (no chain of controller references leads to it)"))
}
