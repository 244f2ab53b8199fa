package etcd

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	kwait "k8s.io/apimachinery/pkg/util/wait"
)

// Defaults for DialerOptions fields left at zero.
const (
	DefaultDialTimeout     = 2 * time.Second
	DefaultRequestTimeout  = 5 * time.Second
	DefaultStatusTimeout   = time.Second
	DefaultElectionWait    = 2 * time.Second
	DefaultSnapshotTimeout = 5 * time.Minute
)

// DialerOptions configures the Dialer returned by NewDialer. Zero values pick
// the defaults above.
type DialerOptions struct {
	// DialTimeout bounds establishing a connection.
	DialTimeout time.Duration
	// RequestTimeout bounds each membership or maintenance call (in addition
	// to the caller's context).
	RequestTimeout time.Duration
	// StatusTimeout bounds the per-member status probe made by ListMembers; a
	// member that does not answer within it is reported unhealthy.
	StatusTimeout time.Duration
	// ElectionWait bounds how long ListMembers asks again while an election
	// may be under way (fewer healthy voters than a quorum, and a voter
	// without a leader). etcd's default election timeout is 1 s, randomised
	// up to 2 s.
	ElectionWait time.Duration
	// SnapshotTimeout bounds a whole Snapshot download.
	SnapshotTimeout time.Duration
	// TLS, when set, is used for the client connections (https client URLs).
	TLS *tls.Config
	// Logger receives go.etcd.io/etcd/client/v3's own logs; nil discards them.
	Logger *zap.Logger
}

func (o DialerOptions) withDefaults() DialerOptions {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.StatusTimeout <= 0 {
		o.StatusTimeout = DefaultStatusTimeout
	}
	if o.ElectionWait <= 0 {
		o.ElectionWait = DefaultElectionWait
	}
	if o.SnapshotTimeout <= 0 {
		o.SnapshotTimeout = DefaultSnapshotTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// NewDialer returns a Dialer that talks to real etcd members through
// go.etcd.io/etcd/client/v3.
func NewDialer(opts DialerOptions) Dialer {
	opts = opts.withDefaults()
	return DialerFunc(func(ctx context.Context, endpoints []string) (Client, error) {
		return dial(ctx, opts, endpoints)
	})
}

func dial(ctx context.Context, opts DialerOptions, endpoints []string) (*client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("dial etcd: no endpoints")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dial etcd: %w", err)
	}
	cli, err := clientv3.New(opts.config(endpoints))
	if err != nil {
		return nil, fmt.Errorf("dial etcd (%d endpoints): %w", len(endpoints), err)
	}
	return &client{opts: opts, cli: cli, endpoints: slices.Clone(endpoints)}, nil
}

func (o DialerOptions) config(endpoints []string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   slices.Clone(endpoints),
		DialTimeout: o.DialTimeout,
		// Detect a dead member's connection between reconciles.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: o.DialTimeout,
		TLS:                  o.TLS,
		Logger:               o.Logger,
	}
}

// client implements Client over a clientv3.Client.
type client struct {
	opts      DialerOptions
	cli       *clientv3.Client
	endpoints []string
}

var _ Client = (*client)(nil)

func (c *client) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.RequestTimeout)
}

// memberStatus is the outcome of probing one member's client URL.
type memberStatus struct {
	resp *clientv3.StatusResponse
	err  error
}

// ListMembers lists the members, then probes every member that has a client
// URL in parallel for health and the leader's identity. When the answers
// leave fewer healthy voters than a quorum and a voter said it has no
// leader, an election may be under way (a leader that shuts down hands over
// in milliseconds, one that dies is replaced within an election timeout):
// the members are asked again until they name a leader or ElectionWait has
// passed, so that an election is not reported as a lost quorum.
func (c *client) ListMembers(ctx context.Context) ([]Member, error) {
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	list, err := c.cli.MemberList(rctx)
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}

	members := make([]Member, 0, len(list.Members))
	for _, m := range list.Members {
		members = append(members, Member{
			ID:         m.ID,
			Name:       m.Name,
			PeerURLs:   slices.Clone(m.PeerURLs),
			ClientURLs: slices.Clone(m.ClientURLs),
			IsLearner:  m.IsLearner,
		})
	}
	err = waitOutElection(ctx, c.opts.ElectionWait, electionRecheck, func() (bool, error) {
		noLeader, err := c.probeMembers(ctx, members)
		return quorumInDoubt(members, noLeader), err
	})
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}
	slices.SortStableFunc(members, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return members, nil
}

// electionRecheck is how often members are asked again while an election may
// be under way.
const electionRecheck = 200 * time.Millisecond

// waitOutElection calls probe, and again every interval while it reports the
// quorum in doubt, until wait has passed. It returns ctx's error if the
// context ends first, and probe's error at once.
func waitOutElection(ctx context.Context, wait, interval time.Duration, probe func() (inDoubt bool, err error)) error {
	err := kwait.PollUntilContextTimeout(ctx, interval, wait, true, func(context.Context) (bool, error) {
		inDoubt, err := probe()
		return !inDoubt, err
	})
	if err != nil && ctx.Err() == nil && kwait.Interrupted(err) {
		return nil // the wait has passed: the doubt is the caller's to read
	}
	return err
}

// quorumInDoubt tells whether the members' health shows fewer healthy voters
// than a quorum while a voter answered that it has no leader: the answer of
// an election in progress, not yet of a lost quorum.
func quorumInDoubt(members []Member, noLeader map[uint64]bool) bool {
	voters, healthy, electing := 0, 0, false
	for _, m := range members {
		if m.IsLearner {
			continue
		}
		voters++
		if m.Healthy {
			healthy++
		}
		electing = electing || noLeader[m.ID]
	}
	return electing && healthy < Quorum(voters)
}

// probeMembers asks every member for its status and sets Healthy and Leader;
// it returns the members that answered without naming a leader.
func (c *client) probeMembers(ctx context.Context, members []Member) (map[uint64]bool, error) {
	statuses, alarms, alarmsErr := c.memberStatuses(ctx, members)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	leader := newestLeader(statuses)
	noLeader := map[uint64]bool{}
	for i := range members {
		s := statuses[i]
		members[i].Leader = leader != 0 && members[i].ID == leader
		switch {
		case s.err != nil || s.resp == nil:
			members[i].Healthy = false
		case alarmsErr != nil:
			// Without the alarm list, any reported error counts against the
			// member: Status lists the cluster's alarms and "no leader".
			members[i].Healthy = len(s.resp.Errors) == 0
		default:
			members[i].Healthy = s.resp.Leader != 0 && !alarms[members[i].ID]
		}
		if s.err == nil && s.resp != nil && s.resp.Leader == 0 {
			noLeader[members[i].ID] = true
		}
	}
	return noLeader, nil
}

// memberStatuses asks, all at once, every member for its status (one per
// member, in order) and the cluster for its alarms.
func (c *client) memberStatuses(ctx context.Context, members []Member) (statuses []memberStatus, alarms map[uint64]bool, alarmsErr error) {
	statuses = make([]memberStatus, len(members))
	// The endpoints dialed are asked too, and what a member says there wins
	// over its advertised client URL: the caller dials the addresses it
	// knows to be current (a pod's IP), while the advertised name may
	// still resolve to an address the member no longer has (a node
	// restarted, its pods' addresses changed, the cluster's DNS caches
	// the old one for its TTL).
	direct := make([]memberStatus, len(c.endpoints))
	var wg sync.WaitGroup
	probe := func(url string, into *memberStatus) {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, c.opts.StatusTimeout)
			defer cancel()
			into.resp, into.err = c.cli.Status(sctx, url)
		})
	}
	for i, ep := range c.endpoints {
		probe(ep, &direct[i])
	}
	for i, m := range members {
		if len(m.ClientURLs) == 0 {
			// A learner whose process has not started yet.
			statuses[i].err = errors.New("no client URL")
			continue
		}
		probe(m.ClientURLs[0], &statuses[i])
	}
	wg.Go(func() {
		actx, cancel := context.WithTimeout(ctx, c.opts.StatusTimeout)
		defer cancel()
		alarms, alarmsErr = c.alarmedMembers(actx)
	})
	wg.Wait()
	byID := map[uint64]*clientv3.StatusResponse{}
	for _, d := range direct {
		if d.err == nil && d.resp != nil && d.resp.Header != nil {
			byID[d.resp.Header.MemberId] = d.resp
		}
	}
	for i, m := range members {
		if resp, ok := byID[m.ID]; ok {
			statuses[i] = memberStatus{resp: resp}
		}
	}
	return statuses, alarms, alarmsErr
}

// newestLeader is the leader named by the answer with the highest raft
// term (0 when none names one): during an election, members that have not
// heard of the new term still name the old leader.
func newestLeader(statuses []memberStatus) uint64 {
	var leader, term uint64
	for _, s := range statuses {
		if s.err != nil || s.resp == nil || s.resp.Leader == 0 {
			continue
		}
		if leader == 0 || s.resp.RaftTerm > term {
			leader, term = s.resp.Leader, s.resp.RaftTerm
		}
	}
	return leader
}

// alarmedMembers returns the IDs of the members with an active alarm.
func (c *client) alarmedMembers(ctx context.Context) (map[uint64]bool, error) {
	resp, err := c.cli.AlarmList(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(map[uint64]bool, len(resp.Alarms))
	for _, a := range resp.Alarms {
		ids[a.MemberID] = true
	}
	return ids, nil
}

// AddLearner registers a non-voting member with the given peer URL.
func (c *client) AddLearner(ctx context.Context, peerURL string) (Member, error) {
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	resp, err := c.cli.MemberAddAsLearner(rctx, []string{peerURL})
	if err != nil {
		return Member{}, fmt.Errorf("add etcd learner: %w", err)
	}
	m := resp.Member
	if m == nil {
		return Member{}, errors.New("add etcd learner: response carries no member")
	}
	return Member{
		ID:         m.ID,
		Name:       m.Name,
		PeerURLs:   slices.Clone(m.PeerURLs),
		ClientURLs: slices.Clone(m.ClientURLs),
		IsLearner:  m.IsLearner,
	}, nil
}

// Promote turns a learner into a voting member.
func (c *client) Promote(ctx context.Context, id uint64) error {
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	if _, err := c.cli.MemberPromote(rctx, id); err != nil {
		return fmt.Errorf("promote etcd member %s: %w", FormatID(id), mapError(err))
	}
	return nil
}

// Remove deletes a member from the cluster.
func (c *client) Remove(ctx context.Context, id uint64) error {
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	if _, err := c.cli.MemberRemove(rctx, id); err != nil {
		return fmt.Errorf("remove etcd member %s: %w", FormatID(id), mapError(err))
	}
	return nil
}

// MoveLeader transfers leadership to the given voting member. The request has to
// reach the current leader, so it is sent over a connection to the leader's
// client URL only; if leadership moves in between, it is retried.
func (c *client) MoveLeader(ctx context.Context, to uint64) error {
	const attempts = 3
	var lastErr error
	for range attempts {
		members, err := c.ListMembers(ctx)
		if err != nil {
			return fmt.Errorf("move etcd leader to %s: %w", FormatID(to), err)
		}
		var target, leader *Member
		for i := range members {
			if members[i].ID == to {
				target = &members[i]
			}
			if members[i].Leader {
				leader = &members[i]
			}
		}
		switch {
		case target == nil:
			return fmt.Errorf("move etcd leader to %s: %w", FormatID(to), ErrMemberNotFound)
		case target.IsLearner:
			return fmt.Errorf("move etcd leader to %s: member is a learner", FormatID(to))
		case target.Leader:
			return nil
		case leader == nil:
			return fmt.Errorf("move etcd leader to %s: the cluster has no leader", FormatID(to))
		case len(leader.ClientURLs) == 0:
			return fmt.Errorf("move etcd leader to %s: leader %s has no client URL", FormatID(to), leader.IDString())
		}

		lastErr = c.moveLeaderVia(ctx, leader.ClientURLs[0], to)
		if lastErr == nil {
			return nil
		}
		if !isEtcdError(lastErr, rpctypes.ErrNotLeader, rpctypes.ErrGRPCNotLeader) {
			break
		}
		if err := ctx.Err(); err != nil {
			break
		}
	}
	return fmt.Errorf("move etcd leader to %s: %w", FormatID(to), mapError(lastErr))
}

func (c *client) moveLeaderVia(ctx context.Context, leaderURL string, to uint64) error {
	leaderCli, err := clientv3.New(c.opts.config([]string{leaderURL}))
	if err != nil {
		return fmt.Errorf("connect to the leader: %w", err)
	}
	defer func() { _ = leaderCli.Close() }()
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	_, err = leaderCli.MoveLeader(rctx, to)
	return err
}

// Snapshot streams a point-in-time snapshot of the keyspace from one member into
// w. The stream is the member's bbolt database followed by its sha256.
func (c *client) Snapshot(ctx context.Context, w io.Writer) error {
	sctx, cancel := context.WithTimeout(ctx, c.opts.SnapshotTimeout)
	defer cancel()
	resp, err := c.cli.SnapshotWithVersion(sctx)
	if err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	defer func() { _ = resp.Snapshot.Close() }()
	if _, err := io.Copy(w, resp.Snapshot); err != nil {
		return fmt.Errorf("etcd snapshot: copy: %w", err)
	}
	return nil
}

// Close releases the client's connections.
func (c *client) Close() error {
	if err := c.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// mapError translates etcd's errors to this package's sentinels, keeping etcd's
// error in the chain.
func mapError(err error) error {
	switch {
	case err == nil:
		return nil
	case isEtcdError(err, rpctypes.ErrMemberNotFound, rpctypes.ErrGRPCMemberNotFound):
		return fmt.Errorf("%w: %w", ErrMemberNotFound, err)
	case isEtcdError(err, rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrGRPCLearnerNotReady):
		return fmt.Errorf("%w: %w", ErrLearnerNotReady, err)
	case isEtcdError(err, rpctypes.ErrUnhealthy, rpctypes.ErrGRPCUnhealthy),
		isEtcdError(err, rpctypes.ErrMemberNotEnoughStarted, rpctypes.ErrGRPCMemberNotEnoughStarted):
		return fmt.Errorf("%w: %w", ErrClusterNotReady, err)
	}
	return err
}

// isEtcdError reports whether err is the given etcd error, either in its client
// form (rpctypes.EtcdError) or its gRPC status form.
func isEtcdError(err, clientErr, grpcErr error) bool {
	if errors.Is(err, clientErr) || errors.Is(err, grpcErr) {
		return true
	}
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		return etcdErr.Error() == rpctypes.ErrorDesc(grpcErr)
	}
	return strings.HasSuffix(rpctypes.ErrorDesc(err), rpctypes.ErrorDesc(grpcErr))
}
