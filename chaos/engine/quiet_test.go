package engine

import (
	"context"
	"sync/atomic"
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

// stillRun is a run on a fake dynamic client holding a resource and the
// StatefulSet it controls.
func stillRun(t *testing.T) (*run, *dynamicfake.FakeDynamicClient, schema.GroupVersionResource) {
	t.Helper()
	dbs := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "databases"}
	kinds := map[schema.GroupVersionResource]string{dbs: "DatabaseList"}
	for _, gvr := range compare.ChildResources {
		kinds[gvr] = "List"
	}
	db := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Database",
		"metadata": map[string]any{"name": "db", "namespace": "ns", "uid": "u1"}, "status": map[string]any{"ready": int64(3)}}}
	sts := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "db", "namespace": "ns", "labels": map[string]any{"owner-rv": "1"}},
		"spec":     map[string]any{"replicas": int64(3)}}}
	sts.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Database", Name: "db", UID: "u1", Controller: new(true)}})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, db, sts)
	return &run{e: &Engine{Dynamic: dyn}, ns: "ns", obj: db, gvr: dbs}, dyn, dbs
}

// Where no proxy sees the operator's writes, the wait for quiet reads
// them: it ends only once the resource and its children have not changed
// for the quiet period, so the writes that catch up after a heal fall
// before the stillness window, not in it.
func TestAwaitStillWaitsOutTheCatchingUp(t *testing.T) {
	g := NewWithT(t)
	r, dyn, _ := stillRun(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sts := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	var lastWrite atomic.Int64
	go func() {
		for i := range 4 { // the operator labels the StatefulSet with the resource's version, four times
			time.Sleep(150 * time.Millisecond)
			u, err := dyn.Resource(sts).Namespace("ns").Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return
			}
			u.SetLabels(map[string]string{"owner-rv": string(rune('2' + i))})
			if _, err := dyn.Resource(sts).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err == nil {
				lastWrite.Store(time.Now().UnixNano())
			}
		}
	}()
	r.awaitStill(ctx, 400*time.Millisecond, 20*time.Second)
	ended := time.Now()
	g.Expect(lastWrite.Load()).NotTo(BeZero())
	g.Expect(ended.Sub(time.Unix(0, lastWrite.Load()))).To(BeNumerically(">=", 400*time.Millisecond),
		"the wait ends a quiet period after the last write, not before it")
}

// A resource that never falls quiet is waited for no longer than the
// bound; the stillness window then judges it.
func TestAwaitStillIsBounded(t *testing.T) {
	g := NewWithT(t)
	r, dyn, dbs := stillRun(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for n := int64(0); ctx.Err() == nil; n++ {
			u, err := dyn.Resource(dbs).Namespace("ns").Get(ctx, "db", metav1.GetOptions{})
			if err == nil {
				_ = unstructured.SetNestedField(u.Object, n, "status", "heartbeat")
				_, _ = dyn.Resource(dbs).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{})
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	done := make(chan struct{})
	go func() { r.awaitStill(ctx, 400*time.Millisecond, time.Second); close(done) }()
	g.Eventually(done).WithTimeout(20*time.Second).Should(BeClosed(), "the wait gives up at its bound")
}
