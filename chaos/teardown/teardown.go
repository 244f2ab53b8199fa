package teardown

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// seenGoneWithin bounds the wait for the watch to deliver the resource's
// own deletion once a read has found it gone: a watch event trails the
// read by milliseconds on an idle API server.
const seenGoneWithin = 5 * time.Second

// Watch records, from a listing taken before the resource is deleted,
// when the resource and each listed object went, which objects the
// resource controls, and the last state of each object it controls that
// was made after the listing: work begun for the deletion.
type Watch struct {
	mu       sync.Mutex
	owner    types.UID
	resource string               // Kind/name
	listed   map[string]bool      // Kind/name of what the listing held
	gone     map[string]time.Time // Kind/name -> when the watch saw it deleted
	children map[string]bool      // Kind/name of objects the resource controls
	made     map[string]*unstructured.Unstructured
	stop     []func()
}

// Start watches each kind of the listing from its list's resourceVersion.
// The listing must hold the resource's own kind for its deletion to be
// seen.
func Start(ctx context.Context, dyn dynamic.Interface, ns string, resource *unstructured.Unstructured, listing compare.Listing) (*Watch, error) {
	w := &Watch{owner: resource.GetUID(), resource: resource.GetKind() + "/" + resource.GetName(),
		listed: map[string]bool{}, gone: map[string]time.Time{}, children: map[string]bool{},
		made: map[string]*unstructured.Unstructured{}}
	for _, l := range listing {
		for i := range l.List.Items {
			u := &l.List.Items[i]
			w.listed[u.GetKind()+"/"+u.GetName()] = true
			w.note(u)
		}
		wi, err := dyn.Resource(l.Resource).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.List.GetResourceVersion()})
		if err != nil {
			w.Stop()
			return nil, fmt.Errorf("watching %s: %w", l.Resource.Resource, err)
		}
		w.stop = append(w.stop, wi.Stop)
		go w.follow(wi)
	}
	return w, nil
}

func (w *Watch) note(u *unstructured.Unstructured) {
	ref := metav1.GetControllerOf(u)
	if ref == nil || ref.UID != w.owner {
		return
	}
	key := u.GetKind() + "/" + u.GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.children[key] = true
	if !w.listed[key] {
		w.made[key] = u
	}
}

func (w *Watch) follow(wi watch.Interface) {
	for ev := range wi.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		w.note(u)
		if ev.Type == watch.Deleted {
			w.mu.Lock()
			w.gone[u.GetKind()+"/"+u.GetName()] = time.Now()
			w.mu.Unlock()
		}
	}
}

// Stop ends the watches.
func (w *Watch) Stop() {
	for _, s := range w.stop {
		s()
	}
}

// Judge waits (seenGoneWithin at most) for the watch to see the resource
// go, stops the watches and judges what it saw: the work the operator
// began for the deletion and, with childrenFirst, the order in which the
// children went.
func (w *Watch) Judge(ctx context.Context, childrenFirst bool) []report.Check {
	_ = framework.PollFor(ctx, "the watch to see "+w.resource+" deleted", seenGoneWithin, 100*time.Millisecond,
		func(context.Context) (bool, string, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			_, ok := w.gone[w.resource]
			return ok, "not seen yet", nil
		})
	w.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	checks := []report.Check{w.workFinished()}
	if childrenFirst {
		checks = append(checks, w.childrenFirst())
	}
	return checks
}

// childrenFirst checks that every child went before the resource.
func (w *Watch) childrenFirst() report.Check {
	c := report.Check{Kind: "operator", Name: "children deleted before the resource", Value: "in order", Budget: "every child first"}
	resGone, ok := w.gone[w.resource]
	if !ok {
		c.Value, c.Violation = "not seen", "the resource's deletion was not seen by the watch"
		return c
	}
	var late []string
	for _, child := range slices.Sorted(maps.Keys(w.children)) {
		at, gone := w.gone[child]
		switch {
		case !gone:
			late = append(late, child+" still there")
		case at.After(resGone):
			late = append(late, fmt.Sprintf("%s outlived it by %s", child, at.Sub(resGone).Round(time.Millisecond)))
		}
	}
	if len(late) > 0 {
		c.Value = strings.Join(late, "; ")
		c.Violation = "the resource went before its children (its finalizer was released before the cleanup it guards): " + c.Value
	}
	return c
}

// workFinished checks that each object that runs to completion, made by
// the resource's controller once its deletion began, had finished when
// the resource went: the garbage collector removes an unfinished one
// with its owner, so the deletion went on without the work it started.
// One the operator removed itself while the resource was still there is
// its own business (a failed attempt made again, say).
func (w *Watch) workFinished() report.Check {
	c := report.Check{Kind: "operator", Name: "work begun for the deletion finished before the resource went",
		Value: "none unfinished", Budget: "every Job it made for the deletion finished first"}
	resGone, ok := w.gone[w.resource]
	if !ok {
		c.Value = "not judged: the resource's deletion was not seen by the watch"
		return c
	}
	var unfinished []string
	for _, key := range slices.Sorted(maps.Keys(w.made)) {
		if at, gone := w.gone[key]; gone && at.Before(resGone) {
			continue
		}
		if state, done := runState(w.made[key]); !done {
			unfinished = append(unfinished, key+" ("+state+")")
		}
	}
	if len(unfinished) > 0 {
		c.Value = strings.Join(unfinished, ", ")
		c.Violation = "the resource was let go while work its operator began for the deletion had not finished, so the garbage collector removed it unfinished: " + c.Value
	}
	return c
}
