package teardown

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
)

var (
	databases = schema.GroupVersionResource{Group: "db.example.com", Version: "v1", Resource: "databases"}
	jobs      = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	services  = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

func object(apiVersion, kind, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetOwnerReferences(owners)
	return u
}

func finished(u *unstructured.Unstructured, condition string) *unstructured.Unstructured {
	u = u.DeepCopy()
	_ = unstructured.SetNestedField(u.Object, "2026-11-30T02:00:00Z", "status", "startTime")
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": condition, "status": "True"}}, "status", "conditions")
	return u
}

// deletion plays a resource's deletion against a fake API server: the
// resource db controls Service/db from the start; steps run once the
// watch is on, each waited for until the watch has seen it, so that the
// order of the steps is the order the watch records.
type deletion struct {
	t   *testing.T
	g   Gomega
	dyn *dynamicfake.FakeDynamicClient
	db  *unstructured.Unstructured
	w   *Watch
}

func newDeletion(t *testing.T) *deletion {
	g := NewWithT(t)
	db := object("db.example.com/v1", "Database", "db")
	db.SetUID("uid-db")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{databases: "DatabaseList", jobs: "JobList", services: "ServiceList"},
		db, object("v1", "Service", "db", controlledBy(db)))
	listing, err := compare.List(t.Context(), dyn, "ns", databases, jobs, services)
	g.Expect(err).NotTo(HaveOccurred())
	w, err := Start(t.Context(), dyn, "ns", db, listing)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(w.Stop)
	return &deletion{t: t, g: g, dyn: dyn, db: db, w: w}
}

func controlledBy(owner *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(),
		UID: owner.GetUID(), Controller: new(true)}
}

func (d *deletion) create(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	_, err := d.dyn.Resource(gvr).Namespace("ns").Create(d.t.Context(), u, metav1.CreateOptions{})
	d.g.Expect(err).NotTo(HaveOccurred())
	if metav1.GetControllerOf(u) != nil { // the watch keeps nothing else to wait on
		d.seen(func() bool { return d.w.children[u.GetKind()+"/"+u.GetName()] })
	}
}

func (d *deletion) update(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	_, err := d.dyn.Resource(gvr).Namespace("ns").Update(d.t.Context(), u, metav1.UpdateOptions{})
	d.g.Expect(err).NotTo(HaveOccurred())
	d.seen(func() bool { return d.w.made[u.GetKind()+"/"+u.GetName()].Object["status"] != nil })
}

func (d *deletion) remove(gvr schema.GroupVersionResource, key, name string) {
	d.g.Expect(d.dyn.Resource(gvr).Namespace("ns").Delete(d.t.Context(), name, metav1.DeleteOptions{})).To(Succeed())
	var at time.Time
	d.seen(func() bool { t, ok := d.w.gone[key]; at = t; return ok })
	// The next deletion must be recorded strictly later: wait until the
	// clock has moved past this one's.
	d.g.Eventually(func() bool { return time.Now().After(at) }).WithTimeout(time.Second).WithPolling(time.Microsecond).Should(BeTrue())
}

func (d *deletion) seen(f func() bool) {
	d.g.Eventually(func() bool {
		d.w.mu.Lock()
		defer d.w.mu.Unlock()
		return f()
	}).WithTimeout(5 * time.Second).WithPolling(time.Millisecond).Should(BeTrue())
}

func (d *deletion) judge(ctx context.Context, childrenFirst bool) map[string]string {
	out := map[string]string{}
	for _, c := range d.w.Judge(ctx, childrenFirst) {
		out[c.Name] = c.Value
		if c.Violation != "" {
			out[c.Name] = "violation: " + c.Value
		}
	}
	return out
}

const (
	workCheck  = "work begun for the deletion finished before the resource went"
	orderCheck = "children deleted before the resource"
)

// A Job the resource's controller makes for the deletion and that the
// garbage collector removes with the resource, unfinished, is work the
// deletion went on without (the finalizer released before a final
// snapshot was taken).
func TestWorkAbandonedByTheDeletion(t *testing.T) {
	d := newDeletion(t)
	snapshot := object("batch/v1", "Job", "db-final-snapshot", controlledBy(d.db))
	d.create(jobs, snapshot)
	d.remove(databases, "Database/db", "db")
	d.remove(jobs, "Job/db-final-snapshot", "db-final-snapshot") // the garbage collector
	d.remove(services, "Service/db", "db")
	got := d.judge(t.Context(), true)
	d.g.Expect(got[workCheck]).To(Equal("violation: Job/db-final-snapshot (not started)"))
	d.g.Expect(got[orderCheck]).To(HavePrefix("violation: Job/db-final-snapshot outlived it by "))
}

// The same deletion, the Job finished before the resource went: nothing
// to say. A Job that failed also finished (whether the operator may go on
// after a failure is its own rule), and a Job the operator removed while
// the resource was still there is its own business.
func TestWorkFinishedBeforeTheResourceWent(t *testing.T) {
	d := newDeletion(t)
	first := object("batch/v1", "Job", "db-snapshot-1", controlledBy(d.db))
	d.create(jobs, first)
	d.remove(jobs, "Job/db-snapshot-1", "db-snapshot-1") // the operator starts again
	second := object("batch/v1", "Job", "db-snapshot-2", controlledBy(d.db))
	d.create(jobs, second)
	d.update(jobs, finished(second, "Complete"))
	failed := object("batch/v1", "Job", "db-cleanup", controlledBy(d.db))
	d.create(jobs, failed)
	d.update(jobs, finished(failed, "Failed"))
	unowned := object("batch/v1", "Job", "db-audit")
	d.create(jobs, unowned)
	d.remove(jobs, "Job/db-snapshot-2", "db-snapshot-2")
	d.remove(jobs, "Job/db-cleanup", "db-cleanup")
	d.remove(services, "Service/db", "db")
	d.remove(databases, "Database/db", "db")
	got := d.judge(t.Context(), true)
	d.g.Expect(got).To(Equal(map[string]string{workCheck: "none unfinished", orderCheck: "in order"}))
}

// Until the watch sees the resource go, neither judgement can be made:
// the work is not judged, the order is a violation as before.
func TestDeletionNotSeen(t *testing.T) {
	d := newDeletion(t)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond) // not the whole seenGoneWithin
	defer cancel()
	got := d.judge(ctx, true)
	d.g.Expect(got[workCheck]).To(HavePrefix("not judged"))
	d.g.Expect(got[orderCheck]).To(Equal("violation: not seen"))
}

func TestRunState(t *testing.T) {
	g := NewWithT(t)
	job := object("batch/v1", "Job", "j")
	running := job.DeepCopy()
	_ = unstructured.SetNestedField(running.Object, "2026-11-30T02:00:00Z", "status", "startTime")
	_ = unstructured.SetNestedField(running.Object, int64(1), "status", "active")
	pod := func(policy, phase string) *unstructured.Unstructured {
		p := object("v1", "Pod", "p")
		_ = unstructured.SetNestedField(p.Object, policy, "spec", "restartPolicy")
		_ = unstructured.SetNestedField(p.Object, phase, "status", "phase")
		return p
	}
	for _, tc := range []struct {
		u     *unstructured.Unstructured
		state string
		done  bool
	}{
		{job, "not started", false},
		{running, "running: 1 active, 0 succeeded", false},
		{finished(job, "Complete"), "Complete", true},
		{finished(job, "Failed"), "Failed", true},
		{pod("Never", "Running"), "phase Running", false},
		{pod("OnFailure", "Succeeded"), "phase Succeeded", true},
		{pod("Always", "Running"), "serving", true},
		{object("apps/v1", "StatefulSet", "s"), "", true},
	} {
		state, done := runState(tc.u)
		g.Expect([]any{state, done}).To(Equal([]any{tc.state, tc.done}), "%s %s", tc.u.GetKind(), tc.u.Object["status"])
	}
}
