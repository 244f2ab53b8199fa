// Package etcd is the reference operator's view of an etcd cluster's membership:
// a narrow interface over etcd's own cluster and maintenance APIs, so that the
// reconciler can be driven by a scripted fake in the unit and simulation tiers and
// by go.etcd.io/etcd/client/v3 against real members.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Member is one etcd member as the cluster reports it, enriched with the health
// and leadership seen by probing its client URL.
type Member struct {
	// ID is etcd's member ID.
	ID uint64
	// Name is the member's --name; the operator sets it to the pod name.
	// A member added as a learner has no name until its process starts.
	Name string
	// PeerURLs and ClientURLs as registered in the cluster.
	PeerURLs   []string
	ClientURLs []string
	// IsLearner is true for a non-voting member that has not been promoted.
	IsLearner bool
	// Healthy is true when the member answered a status request in time and
	// reported no alarm.
	Healthy bool
	// Leader is true for the member that is the raft leader.
	Leader bool
}

// IDString renders the ID the way etcdctl does (hex), which is how it appears
// in status and logs.
func (m Member) IDString() string { return FormatID(m.ID) }

// FormatID renders a member ID in etcdctl's hex form.
func FormatID(id uint64) string { return strconv.FormatUint(id, 16) }

// ErrMemberNotFound is returned by Promote, Remove and MoveLeader for an ID the
// cluster does not know.
var ErrMemberNotFound = errors.New("etcd member not found")

// ErrLearnerNotReady is returned by Promote while the learner's log is behind the
// leader's; the caller retries later.
var ErrLearnerNotReady = errors.New("etcd learner is not yet in sync with the leader")

// ErrClusterNotReady is returned by a membership change that etcd refuses
// because it judges the cluster not ready for one (etcd's strict
// reconfiguration check: a member started or joined moments ago, or the
// change would leave fewer started voters than a quorum); the caller retries
// later.
var ErrClusterNotReady = errors.New("etcd refuses membership changes until every member has been connected for a while")

// Client manages the membership of one etcd cluster. Implementations must be
// safe for use by one reconcile pass at a time; Close releases connections.
type Client interface {
	// ListMembers returns every member with health and leadership filled in.
	ListMembers(ctx context.Context) ([]Member, error)
	// AddLearner registers a new non-voting member with the given peer URL.
	AddLearner(ctx context.Context, peerURL string) (Member, error)
	// Promote turns a learner into a voting member.
	Promote(ctx context.Context, id uint64) error
	// Remove deletes a member from the cluster.
	Remove(ctx context.Context, id uint64) error
	// MoveLeader transfers leadership to the given voting member.
	MoveLeader(ctx context.Context, to uint64) error
	// Snapshot streams a point-in-time snapshot of the keyspace into w.
	Snapshot(ctx context.Context, w io.Writer) error
	// Close releases the client's connections.
	Close() error
}

// Dialer opens a Client for the members reachable at the given client URLs.
type Dialer interface {
	Dial(ctx context.Context, endpoints []string) (Client, error)
}

// DialerFunc adapts a function to the Dialer interface.
type DialerFunc func(ctx context.Context, endpoints []string) (Client, error)

// Dial calls f.
func (f DialerFunc) Dial(ctx context.Context, endpoints []string) (Client, error) {
	return f(ctx, endpoints)
}

// Quorum is the number of voting members that must agree for the cluster to make
// progress: a strict majority.
//
//	voters  quorum  failures tolerated
//	   1       1        0
//	   2       2        0
//	   3       2        1
//	   4       3        1
//	   5       3        2
//	   6       4        2
//	   7       4        3
//	   8       5        3
//	   9       5        4
//
// An even size adds a member without adding tolerance, which is why the webhook
// warns about it.
func Quorum(voters int) int {
	if voters <= 0 {
		return 0
	}
	return voters/2 + 1
}

// FaultTolerance is how many voting members can fail while a quorum remains.
func FaultTolerance(voters int) int {
	if voters <= 0 {
		return 0
	}
	return voters - Quorum(voters)
}

// describe is used in error messages.
func (m Member) String() string {
	name := m.Name
	if name == "" {
		name = "(unstarted)"
	}
	return fmt.Sprintf("%s[%s]", name, m.IDString())
}
