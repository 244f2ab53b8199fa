// Package etcdlocal runs a real etcd cluster as local processes on 127.0.0.1 for
// tests: one process per member, each with its own free peer and client ports and
// its own data directory under the test's temporary directory.
package etcdlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvBinary names the environment variable the tests read the etcd binary path
// from.
const EnvBinary = "GAUNTLET_ETCD_BIN"

// Timeouts used while waiting for members.
const (
	// ReadyTimeout bounds how long a member may take to start serving.
	ReadyTimeout = 30 * time.Second
	// StopTimeout is how long Stop waits for a graceful exit before killing.
	StopTimeout = 5 * time.Second
	pollEvery   = 50 * time.Millisecond
	// stderrTailLines is how many lines of each member's stderr a failed test
	// logs.
	stderrTailLines = 60
	stderrKeepBytes = 1 << 20
)

// Cluster is a set of local etcd processes. Its methods must be called from the
// test's goroutine (they report problems with t.Fatalf).
type Cluster struct {
	t     testing.TB
	bin   string
	dir   string
	token string

	mu      sync.Mutex
	members []*member
}

type member struct {
	name      string
	peerURL   string
	clientURL string
	dataDir   string
	// flags that only matter on the first start: a restart reuses the data dir.
	initialCluster string
	clusterState   string

	stderr *tailBuffer
	proc   *process
}

// process is one run of a member's etcd binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start launches an n-member cluster (members m0..m{n-1}) from the etcd binary
// at bin and waits until every member serves a healthy /health. All processes
// are killed when the test finishes; if it failed, the tail of each member's
// stderr is logged.
func Start(t testing.TB, bin string, n int) *Cluster {
	t.Helper()
	return StartWith(t, bin, n, Options{})
}

// Member describes one member of a cluster about to start, for Options.Prepare.
type Member struct {
	Name, PeerURL, DataDir string
	// InitialCluster and Token are the cluster's --initial-cluster and
	// --initial-cluster-token.
	InitialCluster, Token string
}

// Options vary StartWith.
type Options struct {
	// Prepare runs for each member before any starts, for example to
	// restore its data directory from a snapshot (which must then be
	// created from scratch: etcdutl refuses an existing one).
	Prepare func(Member)
}

// StartWith is Start with options.
func StartWith(t testing.TB, bin string, n int, o Options) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdlocal: cluster size %d < 1", n)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("etcdlocal: etcd binary: %v", err)
	}
	c := &Cluster{
		t:     t,
		bin:   bin,
		dir:   t.TempDir(), // registered before our cleanup, so removed after it
		token: fmt.Sprintf("etcdlocal-%d-%d", os.Getpid(), time.Now().UnixNano()),
	}
	t.Cleanup(c.cleanup)

	ports := freePorts(t, 2*n)
	for i := range n {
		c.members = append(c.members, c.newMember(fmt.Sprintf("m%d", i), ports[2*i], ports[2*i+1]))
	}
	initial := c.InitialCluster()
	for _, m := range c.members {
		m.initialCluster, m.clusterState = initial, "new"
	}

	if o.Prepare != nil {
		for _, m := range c.members {
			o.Prepare(Member{Name: m.name, PeerURL: m.peerURL, DataDir: m.dataDir, InitialCluster: initial, Token: c.token})
		}
	}
	start := time.Now()
	for _, m := range c.members {
		c.launch(m)
	}
	for i := range c.members {
		c.waitHealthy(i)
	}
	t.Logf("etcdlocal: %d-member cluster healthy after %v", n, time.Since(start).Round(time.Millisecond))
	return c
}

// Binary returns the etcd binary path from GAUNTLET_ETCD_BIN, skipping the test
// when it is unset.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		t.Skip("GAUNTLET_ETCD_BIN is not set: the real-etcd tests run through `make test`, which builds etcd first")
	}
	return bin
}

func (c *Cluster) newMember(name string, peerPort, clientPort int) *member {
	c.t.Helper()
	dataDir := filepath.Join(c.dir, name)
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		c.t.Fatalf("etcdlocal: %v", err)
	}
	return &member{
		name:      name,
		peerURL:   fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		clientURL: fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		dataDir:   dataDir,
		stderr:    &tailBuffer{max: stderrKeepBytes},
	}
}

// Size is the number of members this helper knows of, including added ones.
func (c *Cluster) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members)
}

func (c *Cluster) member(i int) *member {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.members) {
		c.t.Fatalf("etcdlocal: no member %d (have %d)", i, len(c.members))
	}
	return c.members[i]
}

// Name is member i's --name.
func (c *Cluster) Name(i int) string { return c.member(i).name }

// ClientURL is member i's client URL.
func (c *Cluster) ClientURL(i int) string { return c.member(i).clientURL }

// PeerURL is member i's peer URL.
func (c *Cluster) PeerURL(i int) string { return c.member(i).peerURL }

// Endpoints returns the client URLs of the members started by Start (not of
// members added later).
func (c *Cluster) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var eps []string
	for _, m := range c.members {
		if m.clusterState == "new" {
			eps = append(eps, m.clientURL)
		}
	}
	return eps
}

// InitialCluster renders --initial-cluster ("name=peerURL,...") for the given
// members, or for all members when none are given.
func (c *Cluster) InitialCluster(indexes ...int) string {
	c.t.Helper()
	if len(indexes) == 0 {
		for i := range c.Size() {
			indexes = append(indexes, i)
		}
	}
	parts := make([]string, 0, len(indexes))
	for _, i := range indexes {
		m := c.member(i)
		parts = append(parts, m.name+"="+m.peerURL)
	}
	return strings.Join(parts, ",")
}

// Running reports whether member i's process is running.
func (c *Cluster) Running(i int) bool {
	m := c.member(i)
	return m.proc != nil && !m.proc.exited()
}

// NewMember reserves ports, a data directory and the next name (m<N>) for a
// member that will join the running cluster, without starting it; its PeerURL
// is what to pass to etcd's member add. Returns its index.
func (c *Cluster) NewMember() int {
	c.t.Helper()
	ports := freePorts(c.t, 2)
	c.mu.Lock()
	i := len(c.members)
	c.mu.Unlock()
	m := c.newMember(fmt.Sprintf("m%d", i), ports[0], ports[1])
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	return i
}

// Join starts member i (from NewMember) with --initial-cluster-state existing and
// the given --initial-cluster, which must list every current member plus this
// one, and waits until it serves client requests (it has then been admitted and
// published its name; a learner is not expected to pass /health).
func (c *Cluster) Join(i int, initialCluster string) {
	c.t.Helper()
	m := c.member(i)
	if m.proc != nil {
		c.t.Fatalf("etcdlocal: member %s was already started", m.name)
	}
	m.initialCluster, m.clusterState = initialCluster, "existing"
	c.launch(m)
	c.waitServing(i)
}

// Stop stops member i: SIGTERM, then SIGKILL after StopTimeout. Its data
// directory is kept so that Start(i) brings the same member back.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	m := c.member(i)
	if m.proc == nil || m.proc.exited() {
		return
	}
	_ = m.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.proc.done:
	case <-time.After(StopTimeout):
		_ = m.proc.cmd.Process.Kill()
		<-m.proc.done
	}
}

// Kill stops member i with SIGKILL, as a crash would.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	m := c.member(i)
	if m.proc == nil || m.proc.exited() {
		return
	}
	_ = m.proc.cmd.Process.Kill()
	<-m.proc.done
}

// Start restarts a stopped member i from its data directory and waits until it
// is healthy.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	m := c.member(i)
	if m.proc != nil && !m.proc.exited() {
		c.t.Fatalf("etcdlocal: member %s is already running", m.name)
	}
	if m.clusterState == "" {
		c.t.Fatalf("etcdlocal: member %s was never started; use Join", m.name)
	}
	c.launch(m)
	c.waitHealthy(i)
}

func (c *Cluster) launch(m *member) {
	c.t.Helper()
	args := []string{
		"--name=" + m.name,
		"--data-dir=" + m.dataDir,
		"--listen-peer-urls=" + m.peerURL,
		"--initial-advertise-peer-urls=" + m.peerURL,
		"--listen-client-urls=" + m.clientURL,
		"--advertise-client-urls=" + m.clientURL,
		"--initial-cluster=" + m.initialCluster,
		"--initial-cluster-state=" + m.clusterState,
		"--initial-cluster-token=" + c.token,
		"--log-level=info",
		// The test machine's disk is not what is being tested.
		"--unsafe-no-fsync=true",
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout = m.stderr
	cmd.Stderr = m.stderr
	_, _ = fmt.Fprintf(m.stderr, "=== etcdlocal: starting %s\n", m.name)
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("etcdlocal: start %s: %v", m.name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_, _ = fmt.Fprintf(m.stderr, "=== etcdlocal: %s exited: %v\n", m.name, p.err)
		close(p.done)
	}()
	m.proc = p
}

// waitHealthy polls member i's /health until it reports healthy.
func (c *Cluster) waitHealthy(i int) {
	c.t.Helper()
	c.waitFor(i, "/health", func(status int, body []byte) bool {
		var h struct {
			Health string `json:"health"`
		}
		return status == http.StatusOK && json.Unmarshal(body, &h) == nil && h.Health == "true"
	})
}

// waitServing polls member i's /version until it answers.
func (c *Cluster) waitServing(i int) {
	c.t.Helper()
	c.waitFor(i, "/version", func(status int, _ []byte) bool { return status == http.StatusOK })
}

func (c *Cluster) waitFor(i int, path string, ok func(status int, body []byte) bool) {
	c.t.Helper()
	m := c.member(i)
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(ReadyTimeout)
	var last string
	for {
		if m.proc.exited() {
			c.t.Fatalf("etcdlocal: %s exited while waiting for %s (%v); stderr tail:\n%s",
				m.name, path, m.proc.err, m.stderr.tail(stderrTailLines))
		}
		status, body, err := get(c.t.Context(), hc, m.clientURL+path)
		if err == nil && ok(status, body) {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("HTTP %d %s", status, strings.TrimSpace(string(body)))
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcdlocal: %s not ready at %s after %v; last: %s; stderr tail:\n%s",
				m.name, path, ReadyTimeout, last, m.stderr.tail(stderrTailLines))
		}
		time.Sleep(pollEvery)
	}
}

func get(ctx context.Context, hc *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, body, err
}

func (c *Cluster) cleanup() {
	c.mu.Lock()
	members := slices.Clone(c.members)
	c.mu.Unlock()
	for _, m := range members {
		if m.proc != nil && !m.proc.exited() {
			_ = m.proc.cmd.Process.Kill()
		}
	}
	for _, m := range members {
		if m.proc != nil {
			<-m.proc.done
		}
	}
	if c.t.Failed() {
		for _, m := range members {
			if m.proc == nil {
				continue
			}
			c.t.Logf("etcdlocal: %s (client %s, peer %s) stderr, last %d lines:\n%s",
				m.name, m.clientURL, m.peerURL, stderrTailLines, m.stderr.tail(stderrTailLines))
		}
	}
}

// freePorts returns n distinct ports that were free on 127.0.0.1. The listeners
// are held until all ports are picked so that none is handed out twice.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("etcdlocal: reserve a port: %v", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max { // trim in bulk, not on every write
		b.buf = append(b.buf[:0:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

// tail returns the last n lines written.
func (b *tailBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	data := bytes.TrimRight(b.buf, "\n")
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
