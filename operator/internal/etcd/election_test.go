package etcd

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestQuorumInDoubt(t *testing.T) {
	voter := func(id uint64, healthy bool) Member { return Member{ID: id, Healthy: healthy} }
	learner := Member{ID: 9, IsLearner: true}
	for _, tt := range []struct {
		name     string
		members  []Member
		noLeader map[uint64]bool
		want     bool
	}{
		{"quorum healthy, a member without a leader (cut off)", []Member{voter(1, true), voter(2, true), voter(3, false)}, map[uint64]bool{3: true}, false},
		{"below quorum, a voter without a leader (electing)", []Member{voter(1, true), voter(2, false), voter(3, false)}, map[uint64]bool{2: true}, true},
		{"below quorum, every voter naming a leader (members down)", []Member{voter(1, true), voter(2, false), voter(3, false)}, nil, false},
		{"below quorum, only a learner without a leader", []Member{voter(1, true), voter(2, false), voter(3, false), learner}, map[uint64]bool{9: true}, false},
		{"one voter electing alone", []Member{voter(1, false)}, map[uint64]bool{1: true}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := quorumInDoubt(tt.members, tt.noLeader); got != tt.want {
				t.Errorf("quorumInDoubt = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWaitOutElection(t *testing.T) {
	t.Run("asks again until the doubt clears", func(t *testing.T) {
		calls := 0
		err := waitOutElection(t.Context(), time.Second, time.Millisecond, func() (bool, error) {
			calls++
			return calls < 3, nil
		})
		if err != nil || calls != 3 {
			t.Errorf("err %v after %d calls, want nil after 3", err, calls)
		}
	})
	t.Run("gives up when the wait has passed", func(t *testing.T) {
		calls := 0
		start := time.Now()
		err := waitOutElection(t.Context(), 50*time.Millisecond, 10*time.Millisecond, func() (bool, error) {
			calls++
			return true, nil
		})
		if err != nil || calls < 2 || time.Since(start) > time.Second {
			t.Errorf("err %v after %d calls in %v, want nil after a few calls within the wait", err, calls, time.Since(start))
		}
	})
	t.Run("asks once when there is no doubt", func(t *testing.T) {
		calls := 0
		_ = waitOutElection(t.Context(), time.Second, time.Millisecond, func() (bool, error) { calls++; return false, nil })
		if calls != 1 {
			t.Errorf("%d calls, want 1", calls)
		}
	})
	t.Run("returns the probe's error at once", func(t *testing.T) {
		boom := errors.New("boom")
		calls := 0
		err := waitOutElection(t.Context(), time.Second, time.Millisecond, func() (bool, error) { calls++; return true, boom })
		if !errors.Is(err, boom) || calls != 1 {
			t.Errorf("err %v after %d calls, want boom after 1", err, calls)
		}
	})
	t.Run("stops with the context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		err := waitOutElection(ctx, time.Minute, 10*time.Millisecond, func() (bool, error) { cancel(); return true, nil })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	})
}
