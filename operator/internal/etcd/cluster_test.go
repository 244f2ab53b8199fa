package etcd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd/etcdlocal"
)

// waitTimeout bounds every wait for the cluster to reach a state.
const waitTimeout = 20 * time.Second

// startCluster starts a real n-member cluster and dials it through the client
// under test.
func startCluster(t *testing.T, n int) (*etcdlocal.Cluster, etcd.Client) {
	t.Helper()
	bin := etcdlocal.Binary(t)
	c := etcdlocal.Start(t, bin, n)
	cli, err := etcd.NewDialer(etcd.DialerOptions{}).Dial(t.Context(), c.Endpoints())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		if err := cli.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c, cli
}

// describe renders members for failure messages.
func describe(ms []etcd.Member) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		var flags []string
		if m.IsLearner {
			flags = append(flags, "learner")
		} else {
			flags = append(flags, "voter")
		}
		if m.Healthy {
			flags = append(flags, "healthy")
		} else {
			flags = append(flags, "UNHEALTHY")
		}
		if m.Leader {
			flags = append(flags, "LEADER")
		}
		parts = append(parts, fmt.Sprintf("%s(%s)", m, strings.Join(flags, ",")))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// poll calls check until it reports done, failing the test with the last thing
// check saw once timeout has passed.
func poll(t *testing.T, timeout time.Duration, what string, check func() (done bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, seen := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last saw: %s", timeout, what, seen)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test context ended waiting for %s; last saw: %s", what, seen)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitMembers polls ListMembers until ok accepts the list, and returns it.
func waitMembers(t *testing.T, cli etcd.Client, what string, ok func([]etcd.Member) bool) []etcd.Member {
	t.Helper()
	var members []etcd.Member
	poll(t, waitTimeout, what, func() (bool, string) {
		ms, err := cli.ListMembers(t.Context())
		if err != nil {
			return false, "ListMembers error: " + err.Error()
		}
		members = ms
		return ok(ms), describe(ms)
	})
	return members
}

// settled is a cluster of the given number of voters, all healthy, no learner,
// exactly one leader.
func settled(voters int) func([]etcd.Member) bool {
	return func(ms []etcd.Member) bool {
		leaders := 0
		for _, m := range ms {
			if m.IsLearner || !m.Healthy {
				return false
			}
			if m.Leader {
				leaders++
			}
		}
		return len(ms) == voters && leaders == 1
	}
}

func leaderOf(ms []etcd.Member) (etcd.Member, bool) {
	for _, m := range ms {
		if m.Leader {
			return m, true
		}
	}
	return etcd.Member{}, false
}

func followerOf(ms []etcd.Member) (etcd.Member, bool) {
	for _, m := range ms {
		if !m.Leader && !m.IsLearner {
			return m, true
		}
	}
	return etcd.Member{}, false
}
