// Package timeline records an object's status conditions, and the whole
// object, from the API server's watch events, and answers when a condition
// first had a status and whether it ever had one over a span: what a
// scenario's condition assertions are judged on.
//
// It must not know scenarios or how a run is judged.
package timeline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// Timeline records an object's status conditions from watch events, so
// that "how long until Degraded" is measured from what the API server
// served, not from sleeps and spot checks.
type Timeline struct {
	mu      sync.Mutex
	samples []report.Sample
	objects []ObjectSample
	errs    []string
	done    chan struct{}
}

// ObjectSample is the whole object as one watch event delivered it.
type ObjectSample struct {
	At     time.Time
	Object map[string]any
}

// Watch starts recording the conditions of one object until ctx
// ends. A watch that closes is resumed from the last resourceVersion.
func Watch(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string) *Timeline {
	tl := &Timeline{done: make(chan struct{})}
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	res := dyn.Resource(gvr).Namespace(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return res.Watch(ctx, o)
		},
	}
	go func() {
		defer close(tl.done)
		_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted {
				tl.add(time.Now(), u)
			}
			return false, nil
		})
		if err != nil && ctx.Err() == nil {
			tl.mu.Lock()
			tl.errs = append(tl.errs, err.Error())
			tl.mu.Unlock()
		}
	}()
	return tl
}

// New is an empty timeline fed by Record, for a source other than a
// watch (or a test).
func New() *Timeline { return &Timeline{done: make(chan struct{})} }

// Record adds one version of the object observed at at, as a watch event
// does.
func (tl *Timeline) Record(at time.Time, u *unstructured.Unstructured) { tl.add(at, u) }

func (tl *Timeline) add(at time.Time, u *unstructured.Unstructured) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	s := report.Sample{At: at, Conditions: map[string]string{}}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		st, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		s.Conditions[t] = st + "/" + reason
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.objects = append(tl.objects, ObjectSample{At: s.At, Object: u.Object})
	if n := len(tl.samples); n > 0 && fmt.Sprint(tl.samples[n-1].Conditions) == fmt.Sprint(s.Conditions) {
		return // no condition changed
	}
	tl.samples = append(tl.samples, s)
}

// Samples returns the recorded changes, oldest first.
func (tl *Timeline) Samples() []report.Sample {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]report.Sample(nil), tl.samples...)
}

// Objects returns every version of the object the watch delivered, oldest
// first, for assertions over more than its conditions.
func (tl *Timeline) Objects() []ObjectSample {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]ObjectSample(nil), tl.objects...)
}

// Errors are watch failures (the timeline may have gaps).
func (tl *Timeline) Errors() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.errs...)
}

// statusAt is the condition's status in force at t (the last sample at or
// before t), and whether any sample was.
func (tl *Timeline) statusAt(samples []report.Sample, typ string, t time.Time) (metav1.ConditionStatus, bool) {
	var st metav1.ConditionStatus
	found := false
	for _, s := range samples {
		if s.At.After(t) {
			break
		}
		st, found = metav1.ConditionStatus(s.Status(typ)), true
	}
	return st, found
}

// First returns when, at or after from, the condition first had status
// (counting a status already in force at from).
func (tl *Timeline) First(typ string, status metav1.ConditionStatus, from time.Time) (time.Time, bool) {
	samples := tl.Samples()
	if st, ok := tl.statusAt(samples, typ, from); ok && st == status {
		return from, true
	}
	for _, s := range samples {
		if s.At.After(from) && metav1.ConditionStatus(s.Status(typ)) == status {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// Ever tells whether the condition had status at any moment in [from, to].
func (tl *Timeline) Ever(typ string, status metav1.ConditionStatus, from, to time.Time) bool {
	samples := tl.Samples()
	if st, ok := tl.statusAt(samples, typ, from); ok && st == status {
		return true
	}
	for _, s := range samples {
		if s.At.After(from) && !s.At.After(to) && metav1.ConditionStatus(s.Status(typ)) == status {
			return true
		}
	}
	return false
}

// String prints the timeline relative to start, one change per line.
func (tl *Timeline) String(start time.Time) string {
	var b strings.Builder
	for _, s := range tl.Samples() {
		fmt.Fprintf(&b, "%+8.1fs %v\n", s.At.Sub(start).Seconds(), s.Conditions)
	}
	return b.String()
}
