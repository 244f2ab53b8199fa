package workload

import (
	"context"
	"sync"
	"time"
)

// Failover spreads operations over several replicas of one store, each
// reached on its own, the way a client that fails over does: an operation
// goes to the next replica in turn that has not failed within Backoff, and
// a replica that errs (refuses, times out) is avoided for Backoff. A
// replica cut off from the others then costs one failed operation per
// Backoff, instead of one in every len(Replicas) operations for as long as
// the fault lasts. Failed writes stay ambiguous in the ledger: Failover
// never retries an operation.
type Failover struct {
	// Replicas are the same store reached through different members.
	Replicas []KV
	// Backoff is how long a replica that failed is avoided (default 1s).
	Backoff time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu       sync.Mutex
	next     int
	failedAt []time.Time
}

func (f *Failover) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// pick is the replica for the next operation: the next in turn that has not
// failed within Backoff or, when every one has, the one that failed first.
func (f *Failover) pick() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.Replicas)
	if f.failedAt == nil {
		f.failedAt = make([]time.Time, n)
	}
	backoff := f.Backoff
	if backoff == 0 {
		backoff = time.Second
	}
	now := f.now()
	for k := range n {
		i := (f.next + k) % n
		if f.failedAt[i].IsZero() || now.Sub(f.failedAt[i]) >= backoff {
			f.next = i + 1
			return i
		}
	}
	oldest := 0
	for i := range n {
		if f.failedAt[i].Before(f.failedAt[oldest]) {
			oldest = i
		}
	}
	f.next = oldest + 1
	return oldest
}

// done records how an operation on replica i ended.
func (f *Failover) done(i int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.failedAt[i] = f.now()
	} else {
		f.failedAt[i] = time.Time{}
	}
}

// Put implements KV.
func (f *Failover) Put(ctx context.Context, key, value string) (int64, error) {
	i := f.pick()
	rev, err := f.Replicas[i].Put(ctx, key, value)
	f.done(i, err)
	return rev, err
}

// Get implements KV.
func (f *Failover) Get(ctx context.Context, key string) (string, bool, error) {
	i := f.pick()
	v, found, err := f.Replicas[i].Get(ctx, key)
	f.done(i, err)
	return v, found, err
}

// GetAt implements KV. It checks history after the fault, so it asks each
// replica in turn until one answers.
func (f *Failover) GetAt(ctx context.Context, key string, revision int64) (string, int64, bool, error) {
	var err error
	for range f.Replicas {
		i := f.pick()
		var v string
		var mod int64
		var found bool
		v, mod, found, err = f.Replicas[i].GetAt(ctx, key, revision)
		f.done(i, err)
		if err == nil {
			return v, mod, found, nil
		}
	}
	return "", 0, false, err
}
