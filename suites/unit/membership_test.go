package unit

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files from this run")

// transcript records, pass by pass, the steps the operator takes: its calls
// to etcd's member API (with member names, not IDs), the StatefulSet's size,
// the pods it deletes, and what Progressing says.
type transcript struct {
	t        *testing.T
	w        *reference.World
	c        *dbv1.DatabaseCluster
	lines    []string
	calls    int
	replicas int32
	progress string
	// before, between passes, lets a test inject a fault.
	before func(pass int)
	passes int
	failed int // passes that returned an error
}

func newTranscript(t *testing.T, w *reference.World, c *dbv1.DatabaseCluster) *transcript {
	return &transcript{t: t, w: w, c: c, calls: len(w.Etcd.Calls())}
}

func (tr *transcript) logf(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

// names maps member IDs (hex) to names, from etcd's view before a pass.
func (tr *transcript) names() map[string]string {
	out := map[string]string{}
	for _, m := range tr.w.Etcd.Members() {
		name := m.Name
		if name == "" {
			name = memberFromPeerURL(m.PeerURLs[0])
		}
		out[m.IDString()] = name
	}
	return out
}

func memberFromPeerURL(u string) string {
	host := strings.TrimPrefix(u, "http://")
	name, _, _ := strings.Cut(host, ".")
	return name
}

// settle runs passes until one changes nothing, recording each step.
func (tr *transcript) settle() {
	tr.t.Helper()
	g := NewWithT(tr.t)
	for range 80 {
		if tr.before != nil {
			tr.before(tr.passes)
		}
		tr.passes++
		ids := tr.names()
		p, err := tr.w.Driver.Pass(tr.t.Context(), reference.Request(tr.c))
		g.Expect(err).NotTo(HaveOccurred())
		if p.Err != nil {
			tr.failed++
			tr.logf("  pass failed: %v", p.Err)
		}
		calls := tr.w.Etcd.Calls()
		for _, call := range calls[tr.calls:] {
			switch call.Method {
			case operator.EtcdMethodListMembers, operator.EtcdMethodDial:
				continue
			case operator.EtcdMethodAddLearner:
				call.Arg = memberFromPeerURL(call.Arg)
			default:
				call.Arg = ids[call.Arg]
			}
			tr.logf("  etcd %s", call)
		}
		tr.calls = len(calls)
		for _, wr := range p.Writes {
			if wr.Verb == "delete" && wr.Kind == "Pod" {
				tr.logf("  delete pod %s", wr.Key.Name)
			}
		}
		sts := &appsv1.StatefulSet{}
		if err := tr.w.Client.Get(tr.t.Context(), client.ObjectKey{Namespace: tr.c.Namespace, Name: operator.StatefulSetName(tr.c)}, sts); err == nil && *sts.Spec.Replicas != tr.replicas {
			tr.logf("  StatefulSet replicas %d -> %d", tr.replicas, *sts.Spec.Replicas)
			tr.replicas = *sts.Spec.Replicas
		}
		c := &dbv1.DatabaseCluster{}
		g.Expect(tr.w.Client.Get(tr.t.Context(), client.ObjectKeyFromObject(tr.c), c)).To(Succeed())
		if cond := meta.FindStatusCondition(c.Status.Conditions, dbv1.ConditionProgressing); cond != nil {
			if s := fmt.Sprintf("%s %s: %s", cond.Status, cond.Reason, cond.Message); s != tr.progress {
				tr.logf("  Progressing=%s", s)
				tr.progress = s
			}
		}
		if p.Settled() {
			return
		}
	}
	tr.t.Fatalf("did not settle in 80 passes; transcript so far:\n%s", strings.Join(tr.lines, "\n"))
}

// expectMembers checks etcd's membership: n voters named db-0..db-(n-1),
// no learner, one leader, all healthy, and the StatefulSet at n.
func expectMembers(t *testing.T, w *reference.World, c *dbv1.DatabaseCluster, n int) {
	t.Helper()
	g := NewWithT(t)
	var names []string
	leaders := 0
	for _, m := range w.Etcd.Members() {
		g.Expect(m.IsLearner).To(BeFalse(), "learner %s left behind", m)
		g.Expect(m.Healthy).To(BeTrue(), "member %s", m)
		if m.Leader {
			leaders++
		}
		names = append(names, m.Name)
	}
	want := make([]string, n)
	for i := range n {
		want[i] = operator.MemberName(c, i)
	}
	g.Expect(names).To(Equal(want))
	g.Expect(leaders).To(Equal(1))
	sts := &appsv1.StatefulSet{}
	g.Expect(w.Client.Get(t.Context(), client.ObjectKey{Namespace: c.Namespace, Name: operator.StatefulSetName(c)}, sts)).To(Succeed())
	g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(n))
	g.Expect(w.Get(t.Context(), c)).To(Succeed())
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled))
	g.Expect(c).To(framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))
}

// TestScaleTranscript replays 3→5→3→1→3 with the webhook bypassed (3→1 is a
// change it refuses) and compares every membership step with
// testdata/scale-3-5-3-1-3.golden: one change per pass, learners promoted
// only once started, the leader moved away before it is removed, the
// StatefulSet grown after a learner is registered and shrunk after a
// member is gone. Run with -update to rewrite the golden file.
func TestScaleTranscript(t *testing.T) {
	c := reference.NewCluster("default", "db").Build()
	w := reference.NewWorld(t, c)
	tr := newTranscript(t, w, c)
	tr.logf("create with 3 members")
	tr.settle()
	expectMembers(t, w, c, 3)
	// The leader of a bootstrapped cluster is its first member; make the
	// highest ordinal lead so that the scale-down must move leadership.
	w.Etcd.SetLeader("db-2")
	for _, n := range []int32{5, 3, 1, 3} {
		tr.logf("scale to %d", n)
		update(t, w, c, func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = &n })
		tr.settle()
		expectMembers(t, w, c, int(n))
		if n == 5 {
			w.Etcd.SetLeader("db-4")
		}
	}
	compareGolden(t, filepath.Join("testdata", "scale-3-5-3-1-3.golden"), strings.Join(tr.lines, "\n")+"\n")
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Fatalf("transcript differs from %s (-golden +got); run with -update if the change is intended:\n%s", path, diff)
	}
}

// TestMembershipResumesAfterAFailureBetweenSteps runs scale-up, scale-down
// and a rolling upgrade once cleanly, then once per pass of the clean run
// with that pass failing: either every mutating call to etcd's member API
// fails once, or every kind of API write fails once (a crash after the
// previous step, before this one). Each run must settle at the same
// membership, keep a quorum of healthy voters after every pass, and never
// hold two learners at once.
func TestMembershipResumesAfterAFailureBetweenSteps(t *testing.T) {
	const newImage = "gauntlet.dev/etcd:v3.6.15"
	scenarios := []struct {
		name   string
		from   int32
		leader string
		change func(c *dbv1.DatabaseCluster)
		want   int
	}{
		{"scale up 3 to 5", 3, "db-0", func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](5) }, 5},
		{"scale down 5 to 3 from the leader", 5, "db-4", func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](3) }, 3},
		{"upgrade 3 members", 3, "db-2", func(c *dbv1.DatabaseCluster) { c.Spec.Image = newImage }, 3},
	}
	injections := []struct {
		name string
		arm  func(w *reference.World)
	}{
		{"etcd call fails", func(w *reference.World) {
			for _, m := range []string{operator.EtcdMethodAddLearner, operator.EtcdMethodPromote, operator.EtcdMethodRemove, operator.EtcdMethodMoveLeader} {
				w.Etcd.FailNext(m, errors.New("injected: etcd unavailable"))
			}
		}},
		{"API write fails", func(w *reference.World) {
			for _, verb := range []string{"create", "update", "patch", "apply", "delete", "patch/status", "update/status"} {
				w.Faults.Add(framework.Fault{Verb: verb, Err: framework.ErrServerTimeout, Times: 1})
			}
		}},
	}
	for _, sc := range scenarios {
		run := func(t *testing.T, failAt int, arm func(w *reference.World)) (passes, failed int) {
			t.Helper()
			g := NewWithT(t)
			c := reference.NewCluster("default", "db").WithReplicas(sc.from).Build()
			w := reference.NewWorld(t, c)
			settle(t, w, c)
			w.Etcd.SetLeader(sc.leader)
			update(t, w, c, sc.change)
			tr := newTranscript(t, w, c)
			tr.before = func(pass int) {
				w.Etcd.Heal()
				w.Faults.Clear()
				if pass == failAt {
					arm(w)
				}
				expectQuorum(t, w)
			}
			tr.settle()
			w.Etcd.Heal()
			w.Faults.Clear()
			tr.settle() // a pass that failed last is retried
			expectQuorum(t, w)
			expectMembers(t, w, c, sc.want)
			pods := &corev1.PodList{}
			g.Expect(w.Client.List(t.Context(), pods, client.InNamespace(c.Namespace))).To(Succeed())
			for _, p := range pods.Items {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(c.Spec.Image), "pod %s", p.Name)
			}
			return tr.passes, tr.failed
		}
		t.Run(sc.name, func(t *testing.T) {
			passes, _ := run(t, -1, nil)
			for _, inj := range injections {
				failed := 0
				for k := range passes {
					t.Run(fmt.Sprintf("%s at pass %d", inj.name, k), func(t *testing.T) {
						_, f := run(t, k, inj.arm)
						failed += f
					})
				}
				// A pass with nothing of that kind to do cannot fail; the
				// others must have.
				if failed == 0 {
					t.Errorf("%s: no pass of %d failed; the injection never hit", inj.name, passes)
				}
				t.Logf("%s: %d of %d passes failed and were resumed", inj.name, failed, passes)
			}
		})
	}
}

// expectQuorum fails when etcd has fewer healthy voters than a quorum, or
// more than one learner.
func expectQuorum(t *testing.T, w *reference.World) {
	t.Helper()
	voters, healthy, learners := 0, 0, 0
	for _, m := range w.Etcd.Members() {
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
	if voters > 0 && healthy < operator.Quorum(voters) {
		t.Fatalf("quorum lost: %d healthy of %d voters: %v", healthy, voters, w.Etcd.Members())
	}
	if learners > 1 {
		t.Fatalf("%d learners at once: %v", learners, w.Etcd.Members())
	}
}

// TestLostVolumeIsReplacedAsANewMember deletes a member's volume claim and
// pod, as a lost disk would: the pod comes back on an empty volume, etcd
// refuses it (its raft log is gone), and the operator removes the member,
// clears the volume and adds it back as a learner, then promotes it. The
// steps are compared with testdata/replace-lost-volume.golden.
func TestLostVolumeIsReplacedAsANewMember(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := reference.NewCluster("default", "db").Build()
	w := reference.NewWorld(t, c)
	settle(t, w, c)
	before := map[string]string{}
	for _, m := range w.Etcd.Members() {
		before[m.Name] = m.IDString()
	}
	tr := newTranscript(t, w, c)
	tr.replicas = 3
	tr.logf("the volume of db-1 is lost")
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "data-db-1"}}
	g.Expect(w.Client.Delete(ctx, claim)).To(Succeed())
	g.Expect(w.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "db-1"}})).To(Succeed())
	tr.settle()
	expectMembers(t, w, c, 3)
	for _, m := range w.Etcd.Members() {
		if m.Name == "db-1" {
			g.Expect(m.IDString()).NotTo(Equal(before["db-1"]), "db-1 rejoined as a new member")
		} else {
			g.Expect(m.IDString()).To(Equal(before[m.Name]), "%s kept its identity", m.Name)
		}
	}
	compareGolden(t, filepath.Join("testdata", "replace-lost-volume.golden"), strings.Join(tr.lines, "\n")+"\n")
}

// TestUpgradeTranscript rolls a 3-member cluster whose leader is db-2 to a
// new image: followers go first (highest ordinal first), one at a time,
// each only once every member is healthy again; then leadership moves to an
// updated member and the old leader goes last. The steps are compared with
// testdata/upgrade.golden.
func TestUpgradeTranscript(t *testing.T) {
	g := NewWithT(t)
	c := reference.NewCluster("default", "db").Build()
	w := reference.NewWorld(t, c)
	settle(t, w, c)
	w.Etcd.SetLeader("db-2")
	tr := newTranscript(t, w, c)
	tr.replicas = 3
	tr.logf("upgrade to gauntlet.dev/etcd:v3.6.15 with db-2 leading")
	update(t, w, c, func(c *dbv1.DatabaseCluster) { c.Spec.Image = "gauntlet.dev/etcd:v3.6.15" })
	tr.before = func(int) { expectQuorum(t, w) }
	tr.settle()
	expectMembers(t, w, c, 3)
	var deleted []string
	moved := -1
	for i, line := range tr.lines {
		if name, ok := strings.CutPrefix(line, "  delete pod "); ok {
			deleted = append(deleted, name)
		}
		if strings.HasPrefix(line, "  etcd MoveLeader(") {
			moved = len(deleted)
			g.Expect(line).NotTo(ContainSubstring("db-2"), "line %d", i)
		}
	}
	g.Expect(deleted).To(Equal([]string{"db-1", "db-0", "db-2"}), "followers first, the leader last")
	g.Expect(moved).To(Equal(2), "leadership moved away from db-2 just before it was replaced")
	compareGolden(t, filepath.Join("testdata", "upgrade.golden"), strings.Join(tr.lines, "\n")+"\n")
}
