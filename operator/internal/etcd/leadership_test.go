package etcd_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// TestLeadershipChangeIsNotALostQuorum: while leadership moves (as when a
// leader's pod is deleted and its etcd hands over) or the leader dies (a new
// one within an election timeout), clients keep listing the members, and no
// answer may count fewer healthy voters than a quorum: a voter between
// leaders says it has none, which is an election, not a lost quorum. Seed
// 301 of the chaos tier saw Available turn False for a second when the
// operator asked during a handover.
func TestLeadershipChangeIsNotALostQuorum(t *testing.T) {
	c, cli := startCluster(t, 3)
	ms := waitMembers(t, cli, "3 healthy voters and one leader", settled(3))

	t.Run("handovers", func(t *testing.T) {
		w := startWatchers(t, c.Endpoints())
		w.waitForAnswers(t, 1)
		for i := range 30 {
			to := ms[i%len(ms)]
			if err := cli.MoveLeader(t.Context(), to.ID); err != nil {
				t.Errorf("moving the leader to %s: %v", to.Name, err)
			}
			// Four more answers between two handovers, so that the watchers
			// keep asking through every one.
			w.waitForAnswers(t, w.count()+4)
		}
		w.check(t)
	})

	t.Run("leader killed", func(t *testing.T) {
		ms := waitMembers(t, cli, "3 healthy voters and one leader", settled(3))
		leader, _ := leaderOf(ms)
		idx := -1
		var survivors []string
		for i := range c.Size() {
			if c.Name(i) == leader.Name {
				idx = i
			} else {
				survivors = append(survivors, c.ClientURL(i))
			}
		}
		if idx < 0 {
			t.Fatalf("no member is named %s: %s", leader.Name, describe(ms))
		}
		w := startWatchers(t, survivors)
		w.waitForAnswers(t, 1)
		c.Kill(idx)
		// The election is over once the survivors name a new leader; the
		// watchers ask throughout it.
		waitMembers(t, cli, "a new leader among the survivors", func(ms []etcd.Member) bool {
			l, ok := leaderOf(ms)
			return ok && l.ID != leader.ID
		})
		w.check(t)
		c.Start(idx)
	})
}

// watchers list the members from four clients at once, until checked, and
// count the answers with fewer healthy voters than a quorum of three.
type watchers struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	answers int
	wrong   []string
}

func startWatchers(t *testing.T, endpoints []string) *watchers {
	t.Helper()
	w := &watchers{stop: make(chan struct{})}
	for range 4 {
		cl, err := etcd.NewDialer(etcd.DialerOptions{}).Dial(t.Context(), endpoints)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		w.wg.Go(func() {
			defer func() { _ = cl.Close() }()
			for {
				select {
				case <-w.stop:
					return
				default:
				}
				ms, err := cl.ListMembers(t.Context())
				if err != nil {
					continue // a linearizable member list can fail between leaders
				}
				healthy := 0
				for _, m := range ms {
					if m.Healthy && !m.IsLearner {
						healthy++
					}
				}
				w.mu.Lock()
				w.answers++
				if healthy < etcd.Quorum(3) {
					w.wrong = append(w.wrong, describe(ms))
				}
				w.mu.Unlock()
			}
		})
	}
	return w
}

func (w *watchers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answers
}

// waitForAnswers polls until the watchers have had at least n answers.
func (w *watchers) waitForAnswers(t *testing.T, n int) {
	t.Helper()
	poll(t, waitTimeout, fmt.Sprintf("%d answers from the watchers", n), func() (bool, string) {
		got := w.count()
		return got >= n, fmt.Sprintf("%d answers", got)
	})
}

// check stops the watchers and fails the test on any answer that counted
// fewer healthy voters than a quorum.
func (w *watchers) check(t *testing.T) {
	t.Helper()
	close(w.stop)
	w.wg.Wait()
	t.Logf("%d answers", w.answers)
	if len(w.wrong) > 0 {
		t.Errorf("%d of %d answers counted fewer than 2 healthy voters, the first: %s", len(w.wrong), w.answers, w.wrong[0])
	}
}
