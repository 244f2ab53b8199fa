package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	. "github.com/onsi/gomega"
)

// memKV is a linearizable in-memory store with a history of revisions,
// with switches that make it misbehave the way a broken database would.
type memKV struct {
	mu   sync.Mutex
	rev  int64
	hist map[string][]rec // per key, in revision order
	// forget drops every write whose revision is a multiple of it from
	// the history after acknowledging it (a lost write).
	forget int64
	// stale makes Get return the value before the latest one.
	stale bool
	// failEvery makes every n-th Put fail after applying it (a lost reply).
	failEvery, puts int
}

type rec struct {
	rev   int64
	value string
}

func newMemKV() *memKV { return &memKV{hist: map[string][]rec{}} }

func (m *memKV) Put(_ context.Context, key, value string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rev++
	m.puts++
	if m.forget == 0 || m.rev%m.forget != 0 {
		m.hist[key] = append(m.hist[key], rec{m.rev, value})
	}
	if m.failEvery > 0 && m.puts%m.failEvery == 0 {
		return 0, errors.New("connection lost before the reply")
	}
	return m.rev, nil
}

func (m *memKV) Get(_ context.Context, key string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hist[key]
	switch {
	case len(h) == 0:
		return "", false, nil
	case m.stale && len(h) > 1:
		return h[len(h)-2].value, true, nil
	}
	return h[len(h)-1].value, true, nil
}

func (m *memKV) GetAt(_ context.Context, key string, rev int64) (string, int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var last *rec
	for i, r := range m.hist[key] {
		if r.rev <= rev {
			last = &m.hist[key][i]
		}
	}
	if last == nil {
		return "", 0, false, nil
	}
	return last.value, last.rev, true, nil
}

func run(t *testing.T, kv KV) *Ledger {
	t.Helper()
	w := Start(t.Context(), kv, Config{Clients: 4, Keys: 3, Interval: time.Millisecond, Seed: 7})
	// Run until 300 operations are recorded (a count, not a duration).
	NewWithT(t).Eventually(func() int { return len(w.Snapshot()) }).WithTimeout(10 * time.Second).
		WithPolling(5 * time.Millisecond).Should(BeNumerically(">=", 300))
	return w.Stop()
}

func TestHealthyStoreLosesNothingAndIsLinearizable(t *testing.T) {
	g := NewWithT(t)
	l := run(t, newMemKV())
	c := l.Counts()
	g.Expect(c.AckedWrites).To(BeNumerically(">", 20), "the workload wrote")
	g.Expect(c.Reads).To(BeNumerically(">", 20), "the workload read")

	lin := expectSafe(t, l, newMemKVFrom(l))
	g.Expect(lin.Operations).To(Equal(c.AckedWrites + c.Reads))
}

// expectSafe checks a ledger against kv: every acknowledged write is there
// (none lost) and the history is linearizable; it returns the porcupine
// check for further expectations.
func expectSafe(t *testing.T, l *Ledger, kv KV) Linearizability {
	t.Helper()
	g := NewWithT(t)
	checked, lost, err := l.VerifyDurability(t.Context(), kv)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(checked).To(Equal(l.Counts().AckedWrites))
	g.Expect(lost).To(BeEmpty())
	lin, err := l.CheckLinearizable(10*time.Second, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lin.Result).To(Equal(porcupine.Ok))
	return lin
}

// newMemKVFrom replays the ledger's acknowledged writes into a fresh store,
// so durability can be checked against a store that kept everything.
func newMemKVFrom(l *Ledger) *memKV {
	m := newMemKV()
	for _, op := range l.sortedAcks() {
		m.hist[op.Key] = append(m.hist[op.Key], rec{op.Revision, op.Value})
	}
	return m
}

func TestLostWritesAreFound(t *testing.T) {
	g := NewWithT(t)
	kv := newMemKV()
	kv.forget = 5
	l := run(t, kv)
	checked, lost, err := l.VerifyDurability(t.Context(), kv)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(checked).To(Equal(l.Counts().AckedWrites))
	g.Expect(lost).NotTo(BeEmpty())
	g.Expect(lost[0].Reason).To(Or(ContainSubstring("absent"), ContainSubstring("holds")))
}

func TestStaleReadsAreNotLinearizable(t *testing.T) {
	g := NewWithT(t)
	kv := newMemKV()
	kv.stale = true
	l := run(t, kv)
	dir := t.TempDir()
	lin, err := l.CheckLinearizable(10*time.Second, dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lin.Result).To(Equal(porcupine.Illegal))
	for _, f := range []string{lin.Visualization, lin.History} {
		g.Expect(f).To(HavePrefix(dir))
		st, err := os.Stat(f)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Size()).To(BeNumerically(">", 100), filepath.Base(f))
	}
}

func TestAmbiguousWritesMayHaveLanded(t *testing.T) {
	g := NewWithT(t)
	kv := newMemKV()
	kv.failEvery = 3 // applied, but the client hears an error
	l := run(t, kv)
	c := l.Counts()
	g.Expect(c.AmbiguousWrites).To(BeNumerically(">", 5))
	lin, err := l.CheckLinearizable(10*time.Second, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lin.Result).To(Equal(porcupine.Ok), "a read of a write whose reply was lost is legal")
}

func TestLongestWriteGap(t *testing.T) {
	g := NewWithT(t)
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	l := &Ledger{Ops: []Op{
		{Kind: KindPut, Outcome: OK, Invoke: ms(0), Return: ms(10)},
		{Kind: KindPut, Outcome: Ambiguous, Invoke: ms(20), Return: ms(2020)},
		{Kind: KindPut, Outcome: OK, Invoke: ms(1500), Return: ms(1600)},
		{Kind: KindPut, Outcome: OK, Invoke: ms(1610), Return: ms(1650)},
	}}
	gap, resumed := l.LongestWriteGap(0, 1700*time.Millisecond)
	g.Expect(gap).To(Equal(1590 * time.Millisecond))
	g.Expect(resumed).To(Equal(1600 * time.Millisecond))
	gap, resumed = l.LongestWriteGap(1620*time.Millisecond, 3000*time.Millisecond)
	g.Expect(gap).To(Equal(1350*time.Millisecond), "still open at the end")
	g.Expect(resumed).To(Equal(3000 * time.Millisecond))
}

func TestBuckets(t *testing.T) {
	g := NewWithT(t)
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	l := &Ledger{Ops: []Op{
		{Kind: KindPut, Outcome: OK, Invoke: ms(0), Return: ms(10)},
		{Kind: KindGet, Outcome: OK, Invoke: ms(20), Return: ms(50)},
		{Kind: KindPut, Outcome: OK, Invoke: ms(40), Return: ms(90)},
		{Kind: KindPut, Outcome: Ambiguous, Invoke: ms(100), Return: ms(2100)},
		{Kind: KindGet, Outcome: Failed, Invoke: ms(250), Return: ms(260)},
	}}
	bs := l.Buckets(100 * time.Millisecond)
	g.Expect(bs).To(HaveLen(22), "up to the bucket of the last return")
	g.Expect(bs[0]).To(Equal(Bucket{Writes: 2, Reads: 1, P50: 30 * time.Millisecond, Max: 50 * time.Millisecond}))
	g.Expect(bs[1]).To(Equal(Bucket{}), "nothing returned in [100ms, 200ms)")
	g.Expect(bs[2]).To(Equal(Bucket{Errors: 1, P50: 10 * time.Millisecond, Max: 10 * time.Millisecond}))
	g.Expect(bs[21]).To(Equal(Bucket{Errors: 1, P50: 2 * time.Second, Max: 2 * time.Second}), "an ambiguous write counts where it gave up")
	g.Expect((&Ledger{}).Buckets(time.Second)).To(BeNil())
}

func TestAcknowledged(t *testing.T) {
	g := NewWithT(t)
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	l := &Ledger{Ops: []Op{
		{Kind: KindPut, Outcome: OK, Return: ms(10)},
		{Kind: KindGet, Outcome: OK, Return: ms(100)},
		{Kind: KindPut, Outcome: Ambiguous, Return: ms(150)},
		{Kind: KindGet, Outcome: Failed, Return: ms(160)},
		{Kind: KindPut, Outcome: OK, Return: ms(199)},
		{Kind: KindPut, Outcome: OK, Return: ms(200)},
	}}
	g.Expect(l.Acknowledged(0, time.Second)).To(Equal(4))
	g.Expect(l.Acknowledged(100*time.Millisecond, 200*time.Millisecond)).To(Equal(2), "from inclusive, to exclusive; only OK counts")
	g.Expect(l.Acknowledged(time.Second, 2*time.Second)).To(Equal(0))
}

// hungKV answers nothing until its context ends: a member scaled away,
// or a connection waiting to be ready.
type hungKV struct{ memKV }

func (h *hungKV) GetAt(ctx context.Context, _ string, _ int64) (string, int64, bool, error) {
	<-ctx.Done()
	return "", 0, false, ctx.Err()
}

// ctxKV answers like memKV but, like a real client, not once its context
// has ended.
type ctxKV struct{ *memKV }

func (c ctxKV) GetAt(ctx context.Context, key string, rev int64) (string, int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, false, err
	}
	return c.memKV.GetAt(ctx, key, rev)
}

// A member scaled away hangs every read sent to it (its client waits for a
// connection that never comes). It must cost the read-back one bounded
// wait, not the answers of the members that remain: with the engine's
// backoffs, the read-back of every write ends well within its budget
// whichever replica is asked first.
func TestReadBackFailsOverAHungReplica(t *testing.T) {
	l := run(t, newMemKV())
	for first := range 3 {
		t.Run(fmt.Sprintf("asked first: replica %d", first), func(t *testing.T) {
			g := NewWithT(t)
			good := newMemKVFrom(l)
			kv := &Failover{Replicas: []KV{ctxKV{good}, ctxKV{good}, &hungKV{}}, Backoff: time.Second,
				MaxBackoff: 8 * time.Second, ReadTimeout: 100 * time.Millisecond}
			kv.next = first
			ctx, cancel := context.WithTimeout(t.Context(), 2*ReadBackAttempt)
			defer cancel()
			checked, lost, err := l.VerifyDurability(ctx, kv)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lost).To(BeEmpty())
			g.Expect(checked).To(Equal(l.Counts().AckedWrites))
		})
	}
}
