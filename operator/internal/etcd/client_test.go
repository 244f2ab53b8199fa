package etcd_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd/etcdfake"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd/etcdlocal"
)

func TestListMembersUnknownIDsAndSnapshot(t *testing.T) {
	c, cli := startCluster(t, 3)

	t.Run("ListMembers", func(t *testing.T) {
		g := NewWithT(t)
		ms := waitMembers(t, cli, "3 healthy voters and one leader", settled(3))
		g.Expect(ms).To(HaveLen(3))
		for i, m := range ms {
			// Sorted by name; names, URLs and IDs come from the cluster.
			g.Expect(m.Name).To(Equal(c.Name(i)))
			g.Expect(m.ClientURLs).To(Equal([]string{c.ClientURL(i)}))
			g.Expect(m.PeerURLs).To(Equal([]string{c.PeerURL(i)}))
			g.Expect(m.ID).NotTo(BeZero())
			g.Expect(m.IsLearner).To(BeFalse())
			g.Expect(m.Healthy).To(BeTrue())
		}
	})

	t.Run("UnknownID", func(t *testing.T) {
		g := NewWithT(t)
		ms, err := cli.ListMembers(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		unknown := uint64(0x1234_5678_9abc_def0)
		for _, m := range ms {
			g.Expect(m.ID).NotTo(Equal(unknown))
		}
		err = cli.Promote(t.Context(), unknown)
		g.Expect(err).To(MatchError(etcd.ErrMemberNotFound), "promote")
		g.Expect(errors.Is(err, etcd.ErrLearnerNotReady)).To(BeFalse())
		err = cli.Remove(t.Context(), unknown)
		g.Expect(err).To(MatchError(etcd.ErrMemberNotFound), "remove")
		err = cli.MoveLeader(t.Context(), unknown)
		g.Expect(err).To(MatchError(etcd.ErrMemberNotFound), "move leader")
		g.Expect(err.Error()).To(ContainSubstring(etcd.FormatID(unknown)))
	})

	t.Run("Snapshot", func(t *testing.T) {
		g := NewWithT(t)
		// Write a key through a plain client so the snapshot has content to find.
		raw, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = raw.Close() }()
		const probe = "gauntlet-snapshot-probe"
		_, err = raw.Put(t.Context(), probe, "value-"+probe)
		g.Expect(err).NotTo(HaveOccurred())

		// The snapshot comes from whichever member the client picks; a follower
		// may not have applied the write yet, so poll until one contains it.
		var snap []byte
		poll(t, waitTimeout, "a snapshot containing the key written before it", func() (bool, string) {
			var buf bytes.Buffer
			g.Expect(cli.Snapshot(t.Context(), &buf)).To(Succeed())
			snap = buf.Bytes()
			checkSnapshot(t, snap)
			return bytes.Contains(snap, []byte("value-"+probe)), fmt.Sprintf("%d-byte snapshot without the key", len(snap))
		})

		// Where etcdutl was built next to etcd, also let it read the file.
		etcdutl := filepath.Join(filepath.Dir(etcdlocal.Binary(t)), "etcdutl")
		if _, err := os.Stat(etcdutl); err != nil {
			t.Logf("skipping `etcdutl snapshot status`: no etcdutl next to the etcd binary (%v); the structural checks above passed", err)
			return
		}
		path := filepath.Join(t.TempDir(), "snapshot.db")
		g.Expect(os.WriteFile(path, snap, 0o600)).To(Succeed())
		out, err := exec.CommandContext(t.Context(), etcdutl, "snapshot", "status", path, "--write-out=json").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "etcdutl snapshot status: %s", out)
		g.Expect(string(out)).To(ContainSubstring(`"totalKey"`))
	})
}

// checkSnapshot checks what etcd's own tools rely on: the stream is a bbolt
// database (its first page is a meta page with bbolt's magic) followed by the
// sha256 of that database, and the database is a whole number of 512-byte
// sectors (go.etcd.io/etcd/client/v3/snapshot hasChecksum; etcdutl verifies the
// digest the same way on restore).
func checkSnapshot(t *testing.T, snap []byte) {
	t.Helper()
	g := NewWithT(t)
	const (
		boltMagic   = 0xED0CDAED
		boltVersion = 2
		pageHeader  = 16 // id u64, flags u16, count u16, overflow u32
		metaFlag    = 0x04
	)
	g.Expect(len(snap)).To(BeNumerically(">", 4096+sha256.Size), "snapshot too small")
	g.Expect(len(snap)%512).To(Equal(sha256.Size), "snapshot size is not database sectors plus a sha256")
	db, digest := snap[:len(snap)-sha256.Size], snap[len(snap)-sha256.Size:]
	sum := sha256.Sum256(db)
	g.Expect(digest).To(Equal(sum[:]), "sha256 trailer does not match the database")
	g.Expect(binary.LittleEndian.Uint16(db[8:10])&metaFlag).NotTo(BeZero(), "first page is not a bbolt meta page")
	g.Expect(binary.LittleEndian.Uint32(db[pageHeader:pageHeader+4])).To(Equal(uint32(boltMagic)), "bbolt magic")
	g.Expect(binary.LittleEndian.Uint32(db[pageHeader+4:pageHeader+8])).To(Equal(uint32(boltVersion)), "bbolt version")
}

func TestLearnerAddPromoteRemove(t *testing.T) {
	c, cli := startCluster(t, 3)
	g := NewWithT(t)
	waitMembers(t, cli, "3 healthy voters and one leader", settled(3))

	i := c.NewMember()
	var learner etcd.Member
	// etcd's strict reconfiguration check refuses a member add until the serving
	// member has been connected to every voter for 5s (etcdserver.HealthInterval).
	retryWhileUnhealthy(t, "add learner", func() error {
		var err error
		learner, err = cli.AddLearner(t.Context(), c.PeerURL(i))
		return err
	})
	g.Expect(learner.ID).NotTo(BeZero())
	g.Expect(learner.IsLearner).To(BeTrue())
	g.Expect(learner.Name).To(BeEmpty(), "a learner has no name until its process starts")
	g.Expect(learner.PeerURLs).To(Equal([]string{c.PeerURL(i)}))

	ms, err := cli.ListMembers(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ms).To(HaveLen(4), describe(ms))
	g.Expect(ms[0].ID).To(Equal(learner.ID), "the unnamed learner sorts first: %s", describe(ms))
	g.Expect(ms[0].IsLearner).To(BeTrue())
	g.Expect(ms[0].Healthy).To(BeFalse(), "an unstarted learner cannot be healthy")

	// Its process is not running: it cannot have caught up.
	err = cli.Promote(t.Context(), learner.ID)
	g.Expect(err).To(MatchError(etcd.ErrLearnerNotReady))

	c.Join(i, c.InitialCluster())

	poll(t, waitTimeout, "the learner to be promoted", func() (bool, string) {
		err := cli.Promote(t.Context(), learner.ID)
		switch {
		case err == nil:
			return true, ""
		case errors.Is(err, etcd.ErrLearnerNotReady):
			return false, err.Error()
		default:
			t.Fatalf("promote: %v", err)
			return false, ""
		}
	})
	ms = waitMembers(t, cli, "4 healthy voters and one leader", settled(4))
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.Name)
	}
	g.Expect(names).To(Equal([]string{"m0", "m1", "m2", c.Name(i)}))

	retryWhileUnhealthy(t, "remove", func() error { return cli.Remove(t.Context(), learner.ID) })
	ms = waitMembers(t, cli, "3 healthy voters and one leader", settled(3))
	for _, m := range ms {
		g.Expect(m.ID).NotTo(Equal(learner.ID))
	}
	g.Expect(cli.Remove(t.Context(), learner.ID)).To(MatchError(etcd.ErrMemberNotFound), "removing twice")
}

// retryWhileUnhealthy calls f until it succeeds, retrying only while etcd's
// strict reconfiguration check answers "unhealthy cluster".
func retryWhileUnhealthy(t *testing.T, what string, f func() error) {
	t.Helper()
	poll(t, waitTimeout, what+" to be accepted", func() (bool, string) {
		err := f()
		switch {
		case err == nil:
			return true, ""
		case errors.Is(err, rpctypes.ErrUnhealthy):
			return false, err.Error()
		default:
			t.Fatalf("%s: %v", what, err)
			return false, ""
		}
	})
}

func TestMoveLeader(t *testing.T) {
	_, cli := startCluster(t, 3)
	g := NewWithT(t)
	ms := waitMembers(t, cli, "3 healthy voters and one leader", settled(3))
	leader, _ := leaderOf(ms)
	to, _ := followerOf(ms)

	g.Expect(cli.MoveLeader(t.Context(), leader.ID)).To(Succeed(), "moving to the current leader is a no-op")
	g.Expect(cli.MoveLeader(t.Context(), to.ID)).To(Succeed())
	waitMembers(t, cli, fmt.Sprintf("%s to lead", to), func(ms []etcd.Member) bool {
		l, ok := leaderOf(ms)
		return ok && l.ID == to.ID && settled(3)(ms)
	})
}

func TestStoppedMemberIsUnhealthy(t *testing.T) {
	c, cli := startCluster(t, 3)
	g := NewWithT(t)
	ms := waitMembers(t, cli, "3 healthy voters and one leader", settled(3))
	// Stop a follower: the client stays connected to the other two.
	follower, _ := followerOf(ms)
	idx := -1
	for i := range c.Size() {
		if c.Name(i) == follower.Name {
			idx = i
		}
	}
	g.Expect(idx).NotTo(Equal(-1))

	c.Stop(idx)
	start := time.Now()
	waitMembers(t, cli, follower.Name+" unhealthy, the others healthy", func(ms []etcd.Member) bool {
		leaders := 0
		for _, m := range ms {
			if m.Healthy != (m.ID != follower.ID) {
				return false
			}
			if m.Leader {
				leaders++
			}
		}
		return len(ms) == 3 && leaders == 1
	})
	t.Logf("ListMembers with one member down took %v", time.Since(start).Round(time.Millisecond))

	c.Start(idx)
	waitMembers(t, cli, "3 healthy voters and one leader again", settled(3))
}

// TestRemoveRefusedWhileAMemberIsDown: with one of three members stopped,
// real etcd refuses to remove a healthy one (the two voters left would have
// one started member, below their quorum), and the client says so with
// ErrClusterNotReady, which the operator waits on instead of failing. The
// fake etcd of the simulation tier refuses the same change.
func TestRemoveRefusedWhileAMemberIsDown(t *testing.T) {
	c, cli := startCluster(t, 3)
	g := NewWithT(t)
	ms := waitMembers(t, cli, "3 healthy voters and one leader", settled(3))
	leader, _ := leaderOf(ms)
	var down, healthy etcd.Member
	for _, m := range ms {
		switch {
		case m.ID == leader.ID:
		case down.ID == 0:
			down = m
		default:
			healthy = m
		}
	}
	for i := range c.Size() {
		if c.Name(i) == down.Name {
			c.Stop(i)
		}
	}
	waitMembers(t, cli, down.Name+" unhealthy", func(ms []etcd.Member) bool {
		for _, m := range ms {
			if m.ID == down.ID {
				return !m.Healthy
			}
		}
		return false
	})
	err := cli.Remove(t.Context(), healthy.ID)
	g.Expect(err).To(MatchError(etcd.ErrClusterNotReady), "removing healthy %s while %s is down", healthy.Name, down.Name)
	t.Logf("real etcd refused: %v", err)

	fake := etcdfake.New()
	fake.Bootstrap([]string{"m0", "m1", "m2"}, []string{"http://m0:2380", "http://m1:2380", "http://m2:2380"})
	for _, m := range fake.Members() {
		fake.SetHealthy(m.Name, m.Name != "m2")
	}
	fcli, err := fake.Dialer().Dial(t.Context(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	var m1 uint64
	for _, m := range fake.Members() {
		if m.Name == "m1" {
			m1 = m.ID
		}
	}
	err = fcli.Remove(t.Context(), m1)
	g.Expect(err).To(MatchError(etcd.ErrClusterNotReady))
	t.Logf("the fake refused: %v", err)
}
