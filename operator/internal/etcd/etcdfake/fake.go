// Package etcdfake is a scripted, in-memory etcd cluster behind the
// etcd.Client interface, for the unit and simulation tiers: tests arrange
// members, health and leadership, script errors per method, and read back
// the calls the operator made.
package etcdfake

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// Methods that can be scripted to fail, by name.
const (
	MethodDial        = "Dial"
	MethodListMembers = "ListMembers"
	MethodAddLearner  = "AddLearner"
	MethodPromote     = "Promote"
	MethodRemove      = "Remove"
	MethodMoveLeader  = "MoveLeader"
	MethodSnapshot    = "Snapshot"
)

// Call is one call the operator made.
type Call struct {
	Method string
	Arg    string
	Err    error
}

func (c Call) String() string {
	s := c.Method
	if c.Arg != "" {
		s += "(" + c.Arg + ")"
	}
	if c.Err != nil {
		s += " -> " + c.Err.Error()
	}
	return s
}

// Cluster is a fake etcd cluster. The zero value is not usable; call New.
type Cluster struct {
	mu          sync.Mutex
	members     map[uint64]*etcd.Member
	nextID      uint64
	notInSync   map[uint64]bool
	scripted    map[string][]error
	always      map[string]error
	calls       []Call
	snapshotLen int
	// leaderRemovals: members removed while leading (see LeaderRemovals);
	// refusals: membership changes refused for quorum (see Refusals).
	leaderRemovals []string
	refusals       []string
}

// New returns an empty cluster.
func New() *Cluster {
	return &Cluster{
		members:     map[uint64]*etcd.Member{},
		nextID:      0x1000,
		notInSync:   map[uint64]bool{},
		scripted:    map[string][]error{},
		always:      map[string]error{},
		snapshotLen: 4096,
	}
}

// Dialer returns a dialer whose clients all act on this cluster.
func (c *Cluster) Dialer() etcd.Dialer {
	return etcd.DialerFunc(func(_ context.Context, endpoints []string) (etcd.Client, error) {
		if err := c.begin(MethodDial, strings.Join(endpoints, ",")); err != nil {
			return nil, err
		}
		return &client{c: c}, nil
	})
}

// FailNext makes the next calls of method return these errors, in order (a
// nil entry lets that call succeed).
func (c *Cluster) FailNext(method string, errs ...error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scripted[method] = append(c.scripted[method], errs...)
}

// FailAlways makes every call of method return err until Heal.
func (c *Cluster) FailAlways(method string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.always[method] = err
}

// Heal removes every scripted and permanent failure.
func (c *Cluster) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scripted = map[string][]error{}
	c.always = map[string]error{}
}

// Calls returns the calls made so far.
func (c *Cluster) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// Bootstrap forms the cluster from its initial members, as the first etcd
// process started with --initial-cluster-state=new does: every initial
// member is registered as a voter under its name, unstarted and so
// unhealthy until its own process starts; the first is the leader. It does
// nothing once the cluster has members.
func (c *Cluster) Bootstrap(names, peerURLs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.members) > 0 {
		return
	}
	for i, name := range names {
		m := c.addLocked(name, peerURLs[i], false)
		m.Healthy = false
	}
}

// Start is an etcd process starting with its data or joining: it succeeds
// for a member registered under this name, or for a learner registered with
// this peer URL (which takes the name). Any other process cannot start
// (etcd exits: it is not a member), and Start returns false.
func (c *Cluster) Start(name, peerURL string) (etcd.Member, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.Name == name {
			return *m, true
		}
	}
	for _, m := range c.members {
		if m.Name == "" && contains(m.PeerURLs, peerURL) {
			m.Name = name
			return *m, true
		}
	}
	return etcd.Member{}, false
}

// Elect makes the first healthy voter leader when the leader is gone or
// unhealthy and a quorum of voters is healthy, as raft would; without a
// quorum nobody leads.
func (c *Cluster) Elect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	voters, healthy := 0, 0
	var leader *etcd.Member
	for _, m := range c.members {
		if m.IsLearner {
			continue
		}
		voters++
		if m.Healthy {
			healthy++
		}
		if m.Leader {
			leader = m
		}
	}
	if healthy < etcd.Quorum(voters) {
		if leader != nil {
			leader.Leader = false
		}
		return
	}
	if leader != nil && leader.Healthy {
		return
	}
	for _, m := range c.membersLocked() {
		if !m.IsLearner && m.Healthy {
			for _, x := range c.members {
				x.Leader = x.ID == m.ID
			}
			return
		}
	}
}

// SetHealthy sets the health of the named member.
func (c *Cluster) SetHealthy(name string, healthy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.byNameLocked(name); m != nil {
		m.Healthy = healthy
	}
}

// SetLeader makes the named member the leader.
func (c *Cluster) SetLeader(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		m.Leader = m.Name == name
	}
}

// SetInSync says whether a learner has caught up and can be promoted.
func (c *Cluster) SetInSync(name string, inSync bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.byNameLocked(name); m != nil {
		c.notInSync[m.ID] = !inSync
	}
}

// Members returns the members, sorted by name then ID.
func (c *Cluster) Members() []etcd.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.membersLocked()
}

func (c *Cluster) membersLocked() []etcd.Member {
	out := make([]etcd.Member, 0, len(c.members))
	for _, m := range c.members {
		cp := *m
		cp.PeerURLs = append([]string(nil), m.PeerURLs...)
		cp.ClientURLs = append([]string(nil), m.ClientURLs...)
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (c *Cluster) byNameLocked(name string) *etcd.Member {
	for _, m := range c.members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func (c *Cluster) addLocked(name, peerURL string, learner bool) *etcd.Member {
	c.nextID++
	m := &etcd.Member{ID: c.nextID, Name: name, PeerURLs: []string{peerURL}, IsLearner: learner, Healthy: true}
	if len(c.members) == 0 && !learner {
		m.Leader = true
	}
	c.members[m.ID] = m
	return m
}

// begin records a call and returns the scripted error for it, if any.
func (c *Cluster) begin(method, arg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if q := c.scripted[method]; len(q) > 0 {
		err, c.scripted[method] = q[0], q[1:]
	} else if e, ok := c.always[method]; ok {
		err = e
	}
	c.calls = append(c.calls, Call{Method: method, Arg: arg, Err: err})
	return err
}

// votersLocked counts the voting members other than except, and how many of
// them are healthy.
func (c *Cluster) votersLocked(except uint64) (voters, healthy int) {
	for _, m := range c.members {
		if m.IsLearner || m.ID == except {
			continue
		}
		voters++
		if m.Healthy {
			healthy++
		}
	}
	return voters, healthy
}

// noQuorumLocked refuses a membership change while fewer than a quorum of
// voters is healthy: there is no leader to propose it.
func (c *Cluster) noQuorumLocked(what string) error {
	voters, healthy := c.votersLocked(0)
	if voters > 0 && healthy < etcd.Quorum(voters) {
		err := fmt.Errorf("etcdfake: %s: no leader (%d of %d voters healthy): %w", what, healthy, voters, etcd.ErrClusterNotReady)
		c.refusals = append(c.refusals, err.Error())
		return err
	}
	return nil
}

// refuseLocked is etcd's "not enough started members": a change that would
// leave voters with fewer than their quorum started.
func (c *Cluster) refuseLocked(what string, started, voters int) error {
	if err := c.noQuorumLocked(what); err != nil {
		return err
	}
	if voters > 0 && started < etcd.Quorum(voters) {
		err := fmt.Errorf("etcdfake: %s: re-configuration failed due to not enough started members (%d of %d): %w", what, started, voters, etcd.ErrClusterNotReady)
		c.refusals = append(c.refusals, err.Error())
		return err
	}
	return nil
}

// Refusals are the membership changes refused because they would break
// quorum (or had no leader to propose them): an operator whose own checks
// are right asks for none.
func (c *Cluster) Refusals() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.refusals...)
}

// LeaderRemovals names the members removed while they led, when another
// healthy voter could have taken over first.
func (c *Cluster) LeaderRemovals() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.leaderRemovals...)
}

type client struct{ c *Cluster }

func (cl *client) ListMembers(context.Context) ([]etcd.Member, error) {
	if err := cl.c.begin(MethodListMembers, ""); err != nil {
		return nil, err
	}
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	return cl.c.membersLocked(), nil
}

func (cl *client) AddLearner(_ context.Context, peerURL string) (etcd.Member, error) {
	if err := cl.c.begin(MethodAddLearner, peerURL); err != nil {
		return etcd.Member{}, err
	}
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	for _, m := range cl.c.members {
		if contains(m.PeerURLs, peerURL) {
			return etcd.Member{}, fmt.Errorf("etcdfake: peer URL %s already registered by member %s", peerURL, m)
		}
	}
	if err := cl.c.noQuorumLocked("adding a learner at " + peerURL); err != nil {
		return etcd.Member{}, err
	}
	m := cl.c.addLocked("", peerURL, true)
	m.Healthy = false // not started yet
	return *m, nil
}

func (cl *client) Promote(_ context.Context, id uint64) error {
	if err := cl.c.begin(MethodPromote, etcd.FormatID(id)); err != nil {
		return err
	}
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	m, ok := cl.c.members[id]
	switch {
	case !ok:
		return fmt.Errorf("promoting %s: %w", etcd.FormatID(id), etcd.ErrMemberNotFound)
	case !m.IsLearner:
		return fmt.Errorf("etcdfake: member %s is not a learner", m)
	case cl.c.notInSync[id] || m.Name == "":
		return fmt.Errorf("promoting %s: %w", m, etcd.ErrLearnerNotReady)
	}
	// etcd's strict reconfiguration check: the voters after the promotion
	// must have a quorum of started (here: healthy) members.
	voters, started := cl.c.votersLocked(0)
	if m.Healthy {
		started++
	}
	if err := cl.c.refuseLocked("promoting "+m.Name, started, voters+1); err != nil {
		return err
	}
	m.IsLearner = false
	return nil
}

func (cl *client) Remove(_ context.Context, id uint64) error {
	if err := cl.c.begin(MethodRemove, etcd.FormatID(id)); err != nil {
		return err
	}
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	m, ok := cl.c.members[id]
	if !ok {
		return fmt.Errorf("removing %s: %w", etcd.FormatID(id), etcd.ErrMemberNotFound)
	}
	if !m.IsLearner {
		// etcd refuses to remove a voter when the voters left would have
		// fewer started members than their quorum, and a cluster without a
		// quorum has no leader to ask.
		voters, started := cl.c.votersLocked(id)
		if err := cl.c.noQuorumLocked("removing " + m.Name); err != nil {
			return err
		}
		if err := cl.c.refuseLocked("removing "+m.Name, started, voters); err != nil {
			return err
		}
	}
	if m.Leader {
		// Removing the leader works in etcd (it steps down), but costs an
		// election a transfer would have avoided: recorded for the
		// leadership invariant when another voter could have taken over.
		for _, other := range cl.c.members {
			if other.ID != id && !other.IsLearner && other.Healthy {
				cl.c.leaderRemovals = append(cl.c.leaderRemovals, m.Name)
				break
			}
		}
	}
	delete(cl.c.members, id)
	if m.Leader {
		for _, other := range cl.c.membersLocked() {
			if !other.IsLearner {
				cl.c.members[other.ID].Leader = true
				break
			}
		}
	}
	return nil
}

func (cl *client) MoveLeader(_ context.Context, to uint64) error {
	if err := cl.c.begin(MethodMoveLeader, etcd.FormatID(to)); err != nil {
		return err
	}
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	target, ok := cl.c.members[to]
	if !ok {
		return fmt.Errorf("moving leader to %s: %w", etcd.FormatID(to), etcd.ErrMemberNotFound)
	}
	if target.IsLearner {
		return fmt.Errorf("etcdfake: cannot move leadership to learner %s", target)
	}
	for _, m := range cl.c.members {
		m.Leader = m.ID == to
	}
	return nil
}

func (cl *client) Snapshot(_ context.Context, w io.Writer) error {
	if err := cl.c.begin(MethodSnapshot, ""); err != nil {
		return err
	}
	cl.c.mu.Lock()
	n := cl.c.snapshotLen
	cl.c.mu.Unlock()
	_, err := w.Write(make([]byte, n))
	return err
}

func (cl *client) Close() error { return nil }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
