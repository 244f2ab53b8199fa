package reference

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// FakeSnapshotter is a scripted Snapshotter: it can fail, or report the
// snapshot in progress for a number of calls, before it succeeds.
type FakeSnapshotter struct {
	mu         sync.Mutex
	err        error
	errFor     map[string]error
	inProgress int
	calls      int
	now        func() time.Time
}

// NewFakeSnapshotter returns a snapshotter that succeeds at once.
func NewFakeSnapshotter() *FakeSnapshotter { return &FakeSnapshotter{now: time.Now} }

// FailWith makes every call fail with err (nil succeeds again).
func (f *FakeSnapshotter) FailWith(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// FailFor makes calls for the named cluster fail with err (nil succeeds
// again), for a snapshotter shared by many clusters.
func (f *FakeSnapshotter) FailFor(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errFor == nil {
		f.errFor = map[string]error{}
	}
	f.errFor[name] = err
}

// InProgressFor makes the next n calls report the snapshot still running.
func (f *FakeSnapshotter) InProgressFor(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inProgress = n
}

// Calls is how many snapshots were asked for.
func (f *FakeSnapshotter) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// FinalSnapshot implements the operator's Snapshotter.
func (f *FakeSnapshotter) FinalSnapshot(_ context.Context, c *dbv1.DatabaseCluster) (*dbv1.SnapshotStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if err := f.errFor[c.Name]; err != nil {
		return nil, err
	}
	if f.inProgress > 0 {
		f.inProgress--
		return nil, nil
	}
	return &dbv1.SnapshotStatus{
		Location:  fmt.Sprintf("pvc/%s-snapshots/final.db", c.Name),
		TakenAt:   metav1.NewTime(f.now()),
		Revision:  42,
		Hash:      0x5eed,
		TotalKeys: 7,
		SizeBytes: 4096,
	}, nil
}
