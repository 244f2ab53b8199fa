package workload

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// cutOff is a replica that refuses everything, counting the attempts: a
// member with no leader.
type cutOff struct{ calls atomic.Int64 }

var errNoLeader = errors.New("etcdserver: no leader")

func (c *cutOff) Put(context.Context, string, string) (int64, error) {
	c.calls.Add(1)
	return 0, errNoLeader
}

func (c *cutOff) Get(context.Context, string) (string, bool, error) {
	c.calls.Add(1)
	return "", false, errNoLeader
}

func (c *cutOff) GetAt(context.Context, string, int64) (string, int64, bool, error) {
	c.calls.Add(1)
	return "", 0, false, errNoLeader
}

func TestFailoverAvoidsAFailedReplicaForItsBackoff(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	store, bad := newMemKV(), &cutOff{}
	f := &Failover{Replicas: []KV{store, bad, store}, Backoff: time.Second, Now: func() time.Time { return now }}
	ctx := t.Context()

	var errs int
	for i := range 30 {
		if _, err := f.Put(ctx, "k", "v"+string(rune('a'+i%26))); err != nil {
			errs++
		}
	}
	g.Expect(bad.calls.Load()).To(BeEquivalentTo(1), "tried once, then avoided while the clock stands still")
	g.Expect(errs).To(Equal(1))

	now = now.Add(999 * time.Millisecond)
	_, _, _ = f.Get(ctx, "k")
	_, _, _ = f.Get(ctx, "k")
	g.Expect(bad.calls.Load()).To(BeEquivalentTo(1), "still within the backoff")

	now = now.Add(time.Millisecond)
	for range 3 {
		_, _, _ = f.Get(ctx, "k")
	}
	g.Expect(bad.calls.Load()).To(BeEquivalentTo(2), "tried again once the backoff is over")

	_, _, found, err := f.GetAt(ctx, "k", 1)
	g.Expect(err).NotTo(HaveOccurred(), "GetAt asks the next replica when one refuses")
	g.Expect(found).To(BeTrue())
}

// blocking is a replica whose operations hang until released, then refuse:
// a member whose node is gone, probed by one operation at a time.
type blocking struct {
	cutOff
	release chan struct{}
}

func (b *blocking) Put(ctx context.Context, k, v string) (int64, error) {
	<-b.release
	return b.cutOff.Put(ctx, k, v)
}

func TestFailoverBacksOffLongerAndProbesWithOneOperation(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	store, bad := newMemKV(), &blocking{release: make(chan struct{})}
	f := &Failover{Replicas: []KV{store, bad}, Backoff: time.Second, MaxBackoff: 4 * time.Second, Now: clock}
	ctx := t.Context()
	close(bad.release)
	put := func() { _, _ = f.Put(ctx, "k", "v") }

	// Failures in a row: avoided 1 s, then 2 s, then 4 s (the ceiling).
	put()
	put()
	g.Expect(bad.calls.Load()).To(BeEquivalentTo(1), "the first failure")
	for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		before := bad.calls.Load()
		advance(wait - time.Millisecond)
		for range 4 {
			put()
		}
		g.Expect(bad.calls.Load()).To(Equal(before), "avoided for %s after %d failures", wait, before)
		advance(time.Millisecond)
		for range 4 {
			put()
		}
		g.Expect(bad.calls.Load()).To(Equal(before+1), "probed once when %s have passed", wait)
	}

	// While a probe hangs, every other operation avoids the replica.
	bad.release = make(chan struct{})
	advance(4 * time.Second)
	probe := make(chan struct{})
	go func() { defer close(probe); put() }()
	g.Eventually(func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.state[1].probing }).Should(BeTrue())
	calls := bad.calls.Load()
	for range 10 {
		put()
	}
	g.Expect(bad.calls.Load()).To(Equal(calls), "one probe at a time")
	close(bad.release)
	<-probe

	// A success clears the record.
	f.done(1, nil)
	g.Expect(f.state[1]).To(Equal(replicaState{}))
}

func TestFailoverWhenEveryReplicaFailed(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	a, b := &cutOff{}, &cutOff{}
	f := &Failover{Replicas: []KV{a, b}, Now: func() time.Time { return now }}
	_, err := f.Put(t.Context(), "k", "v")
	g.Expect(err).To(MatchError(errNoLeader))
	now = now.Add(time.Millisecond)
	_, err = f.Put(t.Context(), "k", "v")
	g.Expect(err).To(MatchError(errNoLeader))
	now = now.Add(time.Millisecond)
	_, err = f.Put(t.Context(), "k", "v")
	g.Expect(err).To(MatchError(errNoLeader), "with every replica failed, the one that failed first is asked")
	g.Expect(a.calls.Load()).To(BeEquivalentTo(2))
	g.Expect(b.calls.Load()).To(BeEquivalentTo(1))
	_, _, _, err = f.GetAt(t.Context(), "k", 1)
	g.Expect(err).To(MatchError(errNoLeader))
}

// A workload over replicas of one healthy store, one of them cut off, stays
// linearizable and loses nothing; the cut-off replica's refusals are failed
// reads and ambiguous writes.
func TestWorkloadThroughFailover(t *testing.T) {
	g := NewWithT(t)
	store := newMemKV()
	kv := &Failover{Replicas: []KV{store, &cutOff{}, store}, Backoff: 20 * time.Millisecond}
	l := run(t, kv)
	c := l.Counts()
	g.Expect(c.AckedWrites).To(BeNumerically(">", 20))
	g.Expect(c.AmbiguousWrites+c.FailedReads).To(BeNumerically(">", 0), "the cut-off replica was tried")
	expectSafe(t, l, kv)
}
