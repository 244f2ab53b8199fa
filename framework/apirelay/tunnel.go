package apirelay

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Tunnels is the harness's side: it keeps Idle tunnel connections open to
// the relay and splices each one a client takes with a new connection to
// Target.
type Tunnels struct {
	// Dial opens a connection to the relay's tunnel port (through a
	// port-forward).
	Dial func(ctx context.Context) (net.Conn, error)
	// Target is the address of the server the clients are for.
	Target string
	// Idle is how many tunnels wait for a client at once (default 4).
	Idle int
	// Logf, when set, is told when the relay cannot be reached and when it
	// can again.
	Logf func(format string, args ...any)

	paired  atomic.Int64
	failing atomic.Bool
}

// Paired counts the client connections carried so far.
func (t *Tunnels) Paired() int64 { return t.paired.Load() }

// Run keeps the tunnels open until ctx ends.
func (t *Tunnels) Run(ctx context.Context) {
	if t.Idle == 0 {
		t.Idle = 4
	}
	if t.Logf == nil {
		t.Logf = func(string, ...any) {}
	}
	done := make(chan struct{}, t.Idle)
	for range t.Idle {
		go func() {
			t.slot(ctx)
			done <- struct{}{}
		}()
	}
	for range t.Idle {
		<-done
	}
}

// reachRetry paces a slot's attempts while the relay cannot be reached:
// from 100ms, doubling, at most 2s apart (a relay pod restarting answers
// again within seconds).
var reachRetry = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: 8}

// slot keeps one tunnel waiting: once a client takes it, it is spliced in
// the background and the slot opens the next one.
func (t *Tunnels) slot(ctx context.Context) {
	backoff := reachRetry
	for ctx.Err() == nil {
		c, err := t.wait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !t.failing.Swap(true) {
				t.Logf("the API relay cannot be reached: %v (retrying)", err)
			}
			select {
			case <-time.After(backoff.Step()):
			case <-ctx.Done():
				return
			}
			continue
		}
		backoff = reachRetry
		if t.failing.Swap(false) {
			t.Logf("the API relay is reached again")
		}
		go t.carry(ctx, c)
	}
}

// wait opens a tunnel and waits until the relay gives it a client; it
// returns the tunnel, acknowledged.
func (t *Tunnels) wait(ctx context.Context) (net.Conn, error) {
	c, err := t.Dial(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if _, err := c.Write([]byte{Version}); err != nil {
		_ = c.Close()
		return nil, err
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("waiting for a client: %w", err)
	}
	if b[0] != msgGo {
		_ = c.Close()
		return nil, fmt.Errorf("the relay said %q, want %q (another version of the relay image?)", b[0], msgGo)
	}
	if _, err := c.Write([]byte{msgAck}); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// carry splices a tunnel a client took with a new connection to Target.
func (t *Tunnels) carry(ctx context.Context, c net.Conn) {
	var d net.Dialer
	s, err := d.DialContext(ctx, "tcp", t.Target)
	if err != nil {
		t.Logf("a client came through the API relay, but %s refused it: %v", t.Target, err)
		_ = c.Close()
		return
	}
	t.paired.Add(1)
	Splice(c, s)
}
