package workload

import (
	"context"
	"sync"
	"time"
)

// Failover spreads operations over several replicas of one store, each
// reached on its own, the way a client that fails over does: an operation
// goes to the next replica in turn that is not being avoided. A replica
// that errs (refuses, times out) is avoided for Backoff, doubled after each
// failure in a row up to MaxBackoff; once that has passed, one operation
// alone probes it (the others keep avoiding it until the probe ends), and a
// success makes it a replica like the others again. A replica cut off from
// the others for a long fault then costs one failed operation every
// MaxBackoff, not one per client every Backoff. Failed writes stay
// ambiguous in the ledger: Failover never retries an operation.
type Failover struct {
	// Replicas are the same store reached through different members.
	Replicas []KV
	// Backoff is how long a replica that failed once is avoided (default
	// 1s); MaxBackoff bounds its doubling (default 8×Backoff).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// ReadTimeout bounds each replica's answer in GetAt, so a replica that
	// hangs (a member scaled away, its client waiting for a connection
	// that never comes) costs one bounded wait, and the rest of the
	// caller's deadline goes to the others. Zero leaves it to the caller.
	ReadTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu    sync.Mutex
	next  int
	state []replicaState
}

// replicaState is how a replica has fared.
type replicaState struct {
	failedAt time.Time // the last failure; zero when the last operation succeeded
	failures int       // failures in a row
	probing  bool      // an operation is probing it after its backoff
}

func (f *Failover) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// backoff is how long a replica that failed n times in a row is avoided.
func (f *Failover) backoff(n int) time.Duration {
	base := f.Backoff
	if base == 0 {
		base = time.Second
	}
	ceiling := f.MaxBackoff
	if ceiling == 0 {
		ceiling = 8 * base
	}
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// pick is the replica for the next operation: the next in turn that is
// healthy or due a probe or, when none is, the one that failed first (an
// operation is never refused by the client itself).
func (f *Failover) pick() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.Replicas)
	if f.state == nil {
		f.state = make([]replicaState, n)
	}
	now := f.now()
	for k := range n {
		i := (f.next + k) % n
		st := &f.state[i]
		switch {
		case st.failedAt.IsZero():
		case st.probing || now.Sub(st.failedAt) < f.backoff(st.failures):
			continue
		default:
			st.probing = true
		}
		f.next = i + 1
		return i
	}
	oldest := 0
	for i := range n {
		if f.state[i].failedAt.Before(f.state[oldest].failedAt) {
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
	st := &f.state[i]
	st.probing = false
	if err != nil {
		st.failedAt = f.now()
		st.failures++
	} else {
		*st = replicaState{}
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
// replica in turn, each for at most ReadTimeout, until one answers. A
// replica asked when the caller's deadline runs out is not counted as
// failed: the wait was not its own.
func (f *Failover) GetAt(ctx context.Context, key string, revision int64) (string, int64, bool, error) {
	err := ctx.Err()
	for range f.Replicas {
		if ctx.Err() != nil {
			break
		}
		i := f.pick()
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if f.ReadTimeout > 0 {
			rctx, cancel = context.WithTimeout(ctx, f.ReadTimeout)
		}
		var (
			v     string
			mod   int64
			found bool
		)
		v, mod, found, err = f.Replicas[i].GetAt(rctx, key, revision)
		cancel()
		if err != nil && ctx.Err() != nil {
			f.release(i)
			break
		}
		f.done(i, err)
		if err == nil {
			return v, mod, found, nil
		}
	}
	return "", 0, false, err
}

// release ends replica i's operation without judging it.
func (f *Failover) release(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state[i].probing = false
}
