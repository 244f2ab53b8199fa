// Package workload drives a key-value store with concurrent clients while
// faults are injected, records every operation's invocation and completion
// (the ledger), and afterwards proves two things about the history: no
// acknowledged write was lost, and the history is linearizable (checked with
// porcupine against a key-value model).
//
// The store is reached through the small KV interface; EtcdKV adapts etcd's
// v3 client. Another operator's database needs only its own KV adapter.
package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// KV is the store under test. Put and Get must be linearizable operations
// of the store (etcd: a Put, and a Get without WithSerializable).
type KV interface {
	// Put writes value under key and returns the store's revision of the
	// write once the store acknowledged it.
	Put(ctx context.Context, key, value string) (revision int64, err error)
	// Get reads key; found is false when it does not exist.
	Get(ctx context.Context, key string) (value string, found bool, err error)
	// GetAt reads key as of revision, to check an acknowledged write after
	// the fact; it returns the value and the revision that last wrote it.
	GetAt(ctx context.Context, key string, revision int64) (value string, modRevision int64, found bool, err error)
}

// Kind is an operation kind.
type Kind string

// Operation kinds.
const (
	KindPut Kind = "put"
	KindGet Kind = "get"
)

// Outcome is what the client learned about an operation.
type Outcome string

// Outcomes. An ambiguous operation (a timeout, a lost connection) may or
// may not have taken effect: the checker must allow both.
const (
	OK        Outcome = "ok"
	Failed    Outcome = "failed"
	Ambiguous Outcome = "ambiguous"
)

// Op is one ledger entry. Times are nanoseconds since the workload started.
type Op struct {
	Client   int     `json:"client"`
	Kind     Kind    `json:"kind"`
	Key      string  `json:"key"`
	Value    string  `json:"value,omitempty"` // written (put) or read (get)
	Found    bool    `json:"found,omitempty"` // get: the key existed
	Revision int64   `json:"revision,omitempty"`
	Invoke   int64   `json:"invoke"`
	Return   int64   `json:"return"`
	Outcome  Outcome `json:"outcome"`
	Error    string  `json:"error,omitempty"`
}

// Config shapes the load.
type Config struct {
	// Clients is the number of concurrent clients (default 4).
	Clients int
	// Keys is the size of the shared key space (default 8): small, so that
	// clients contend and the linearizability check has something to check.
	Keys int
	// Prefix namespaces the keys (default "gauntlet/workload/").
	Prefix string
	// Interval is each client's pause between operations (default 20ms).
	Interval time.Duration
	// OpTimeout bounds one operation (default 2s); a timeout is ambiguous.
	OpTimeout time.Duration
	// Seed makes the choice of keys and operations replayable.
	Seed uint64
}

func (c *Config) defaults() {
	if c.Clients == 0 {
		c.Clients = 4
	}
	if c.Keys == 0 {
		c.Keys = 8
	}
	if c.Prefix == "" {
		c.Prefix = "gauntlet/workload/"
	}
	if c.Interval == 0 {
		c.Interval = 20 * time.Millisecond
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 2 * time.Second
	}
}

// Workload is a running load; Stop returns its ledger.
type Workload struct {
	cfg    Config
	kv     KV
	start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	ops    []Op
}

// Start runs cfg.Clients clients against kv until Stop.
func Start(ctx context.Context, kv KV, cfg Config) *Workload {
	cfg.defaults()
	ctx, cancel := context.WithCancel(ctx)
	w := &Workload{cfg: cfg, kv: kv, start: time.Now(), cancel: cancel}
	for c := range cfg.Clients {
		w.wg.Add(1)
		go w.client(ctx, c)
	}
	return w
}

func (w *Workload) now() int64 { return time.Since(w.start).Nanoseconds() }

func (w *Workload) client(ctx context.Context, id int) {
	defer w.wg.Done()
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(id)))
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.cfg.Interval):
		}
		key := fmt.Sprintf("%sk%d", w.cfg.Prefix, rng.IntN(w.cfg.Keys))
		op := Op{Client: id, Key: key}
		octx, cancel := context.WithTimeout(ctx, w.cfg.OpTimeout)
		op.Invoke = w.now()
		var err error
		if rng.IntN(2) == 0 {
			op.Kind = KindPut
			op.Value = fmt.Sprintf("c%d-%d", id, seq) // unique per write
			op.Revision, err = w.kv.Put(octx, key, op.Value)
		} else {
			op.Kind = KindGet
			op.Value, op.Found, err = w.kv.Get(octx, key)
		}
		op.Return = w.now()
		cancel()
		if ctx.Err() != nil && err != nil {
			// Stopped mid-operation: the outcome is unknown, and a write
			// may still land. Keep it as ambiguous.
			op.Outcome = Ambiguous
			op.Error = err.Error()
			w.record(op)
			return
		}
		switch {
		case err == nil:
			op.Outcome = OK
		case op.Kind == KindGet:
			op.Outcome = Failed // a failed read changes nothing
		default:
			// A write that errored may still have been committed (the
			// reply was lost): never count it as failed.
			op.Outcome = Ambiguous
		}
		if err != nil {
			op.Error = err.Error()
		}
		w.record(op)
	}
}

func (w *Workload) record(op Op) {
	w.mu.Lock()
	w.ops = append(w.ops, op)
	w.mu.Unlock()
}

// Stop ends the load and returns the ledger.
func (w *Workload) Stop() *Ledger {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return &Ledger{Start: w.start, Ops: append([]Op(nil), w.ops...)}
}

// Snapshot returns the operations recorded so far, without stopping.
func (w *Workload) Snapshot() []Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Op(nil), w.ops...)
}

// Ledger is the history of a workload.
type Ledger struct {
	Start time.Time `json:"start"`
	Ops   []Op      `json:"ops"`
}

// Counts summarises the ledger.
type Counts struct {
	Operations, AckedWrites, AmbiguousWrites, Reads, FailedReads int
}

// Counts counts operations by kind and outcome.
func (l *Ledger) Counts() Counts {
	var c Counts
	c.Operations = len(l.Ops)
	for _, op := range l.Ops {
		switch {
		case op.Kind == KindPut && op.Outcome == OK:
			c.AckedWrites++
		case op.Kind == KindPut:
			c.AmbiguousWrites++
		case op.Outcome == OK:
			c.Reads++
		default:
			c.FailedReads++
		}
	}
	return c
}

// LongestWriteGap is the longest stretch, inside [from, to), without an
// acknowledged write completing: how long writes stopped, and when (as an
// offset from the ledger's start) they came back. from and to are offsets
// from the ledger's start; a gap still open at to ends at to.
func (l *Ledger) LongestWriteGap(from, to time.Duration) (gap, resumed time.Duration) {
	last := from.Nanoseconds()
	var longest, end int64
	for _, op := range l.sortedAcks() {
		if op.Return < from.Nanoseconds() {
			continue
		}
		if op.Return >= to.Nanoseconds() {
			break
		}
		if op.Return-last > longest {
			longest, end = op.Return-last, op.Return
		}
		last = op.Return
	}
	if to.Nanoseconds()-last > longest {
		longest, end = to.Nanoseconds()-last, to.Nanoseconds()
	}
	return time.Duration(longest), time.Duration(end)
}

func (l *Ledger) sortedAcks() []Op {
	var acks []Op
	for _, op := range l.Ops {
		if op.Kind == KindPut && op.Outcome == OK {
			acks = append(acks, op)
		}
	}
	sortByReturn(acks)
	return acks
}

// Lost is an acknowledged write that could not be read back.
type Lost struct {
	Op     Op     `json:"op"`
	Reason string `json:"reason"`
}

// ReadBackAttempt bounds one attempt to read an acknowledged write back.
const ReadBackAttempt = 5 * time.Second

// readBackAtOnce is how many acknowledged writes are read back at once:
// each read is a round trip (through a port-forward, on a cluster), and
// the read-back of a scenario's 400 or so writes one after another took
// 9 to 15 s with four scenarios side by side on two cores.
const readBackAtOnce = 8

// VerifyDurability reads back every acknowledged write at the revision the
// store acknowledged it with: the key must hold exactly that value, written
// at exactly that revision. Reads are retried until ctx ends, so a store
// still electing a leader is waited for rather than blamed. The lost
// writes come in the order they were acknowledged.
func (l *Ledger) VerifyDurability(ctx context.Context, kv KV) (checked int, lost []Lost, err error) {
	acks := l.sortedAcks()
	found := make([]*Lost, len(acks))
	var read atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readBackAtOnce)
	for i, op := range acks {
		g.Go(func() error {
			missing, err := readBack(gctx, kv, op)
			if err != nil {
				return err
			}
			found[i] = missing
			read.Add(1)
			return nil
		})
	}
	err = g.Wait()
	for _, m := range found {
		if m != nil {
			lost = append(lost, *m)
		}
	}
	return int(read.Load()), lost, err
}

// readBack reads one acknowledged write back, each attempt bounded by
// ReadBackAttempt, until an attempt answers or ctx ends; it returns the
// write as lost when the store does not hold it.
func readBack(ctx context.Context, kv KV, op Op) (*Lost, error) {
	for {
		// Each attempt is bounded: a replica that cannot answer (a member
		// scaled away, a connection waiting to be ready) must not hold the
		// whole read-back; the next attempt goes on to another replica.
		actx, cancel := context.WithTimeout(ctx, ReadBackAttempt)
		v, mod, found, err := kv.GetAt(actx, op.Key, op.Revision)
		cancel()
		switch {
		case err == nil && !found:
			return &Lost{Op: op, Reason: fmt.Sprintf("key absent at revision %d", op.Revision)}, nil
		case err == nil && (v != op.Value || mod != op.Revision):
			return &Lost{Op: op, Reason: fmt.Sprintf("at revision %d the key holds %q written at revision %d", op.Revision, v, mod)}, nil
		case err == nil:
			return nil, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("reading back %s@%d: the last attempt: %w (%w)", op.Key, op.Revision, err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(readBackRetry):
		}
	}
}

// readBackRetry is the pause before a failed read-back is tried again.
const readBackRetry = 200 * time.Millisecond

// Bucket is the workload's activity in one window of time.
type Bucket struct {
	// Writes and Reads count operations acknowledged in the window;
	// Errors count those that failed or ended ambiguous there.
	Writes, Reads, Errors int
	// P50 and Max are the latencies of the operations that completed in
	// the window, whatever their outcome (zero when none did).
	P50, Max time.Duration
}

// Acknowledged counts the operations acknowledged (reads and writes with
// outcome OK) that returned in [from, to), offsets from the ledger's start.
func (l *Ledger) Acknowledged(from, to time.Duration) int {
	n := 0
	for _, op := range l.Ops {
		if op.Outcome == OK && op.Return >= from.Nanoseconds() && op.Return < to.Nanoseconds() {
			n++
		}
	}
	return n
}

// Buckets splits the ledger into windows of width from its start, each
// operation counted in the window where it returned, up to the last
// operation's return.
func (l *Ledger) Buckets(width time.Duration) []Bucket {
	if width <= 0 || len(l.Ops) == 0 {
		return nil
	}
	var last int64
	for _, op := range l.Ops {
		last = max(last, op.Return)
	}
	out := make([]Bucket, last/width.Nanoseconds()+1)
	lat := make([][]time.Duration, len(out))
	for _, op := range l.Ops {
		i := op.Return / width.Nanoseconds()
		if i < 0 {
			continue
		}
		b := &out[i]
		switch {
		case op.Outcome != OK:
			b.Errors++
		case op.Kind == KindPut:
			b.Writes++
		default:
			b.Reads++
		}
		lat[i] = append(lat[i], time.Duration(op.Return-op.Invoke))
	}
	for i, ls := range lat {
		if len(ls) == 0 {
			continue
		}
		slices.Sort(ls)
		out[i].P50, out[i].Max = ls[(len(ls)-1)/2], ls[len(ls)-1]
	}
	return out
}
