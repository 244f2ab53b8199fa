// Package apirelay carries connections from inside a cluster to a server on
// the harness's machine when the cluster's pods cannot reach that machine
// (a managed cluster, a Docker engine on another host), through the one
// path that always exists: a port-forward the harness opens to a pod.
//
// The relay runs in the cluster and serves the clients (the operator under
// test) on its listen port. The harness opens tunnel connections to the
// relay's tunnel port through a port-forward and keeps a few idle. Each
// client connection takes an idle tunnel and the two are spliced, byte for
// byte: TLS runs end to end between the client and the harness's server,
// so the relay sees nothing and holds no key.
//
// On a tunnel connection, the harness first sends Version. When a client
// arrives, the relay sends Go and the harness answers Ack, then both
// splice; a tunnel that does not answer (its port-forward broke while it
// waited) is dropped and the next one tried.
package apirelay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Version is the protocol's version, the first byte of a tunnel.
const Version byte = 1

const (
	msgGo  byte = 'G'
	msgAck byte = 'A'
)

// Relay pairs client connections with the harness's tunnels.
type Relay struct {
	// Clients is where the clients connect.
	Clients net.Listener
	// Tunnels is where the harness's tunnel connections arrive.
	Tunnels net.Listener
	// Wait bounds how long a client waits for an idle tunnel (default 30s).
	Wait time.Duration
	// Logf, when set, is told of every pairing and dropped tunnel.
	Logf func(format string, args ...any)

	idle     chan net.Conn
	idleOnce sync.Once
}

// queue is the tunnels waiting idle, made on first use.
func (r *Relay) queue() chan net.Conn {
	r.idleOnce.Do(func() { r.idle = make(chan net.Conn, 64) })
	return r.idle
}

// Serve runs until ctx ends (and returns nil) or a listener fails.
func (r *Relay) Serve(ctx context.Context) error {
	if r.Wait == 0 {
		r.Wait = 30 * time.Second
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
	r.queue()
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-inner.Done()
		_ = r.Clients.Close()
		_ = r.Tunnels.Close()
	}()
	errs := make(chan error, 2)
	go func() { errs <- accept(inner, r.Tunnels, r.tunnel) }()
	go func() { errs <- accept(inner, r.Clients, r.client) }()
	first := <-errs
	cancel()
	second := <-errs
	if ctx.Err() != nil {
		return nil
	}
	if errors.Is(second, net.ErrClosed) {
		second = nil // closed because the first failed
	}
	return errors.Join(first, second)
}

func accept(ctx context.Context, ln net.Listener, handle func(context.Context, net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go handle(ctx, c)
	}
}

// tunnel queues a harness connection once it has said its version; a
// connection that says nothing (a TCP readiness probe) is closed.
func (r *Relay) tunnel(ctx context.Context, c net.Conn) {
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		_ = c.Close()
		return
	}
	if b[0] != Version {
		r.Logf("tunnel from %s speaks version %d, this relay %d: closed", c.RemoteAddr(), b[0], Version)
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	select {
	case r.idle <- c:
	case <-ctx.Done():
		_ = c.Close()
	}
}

// client pairs a client connection with the first idle tunnel that
// answers, and splices them.
func (r *Relay) client(ctx context.Context, c net.Conn) {
	deadline := time.NewTimer(r.Wait)
	defer deadline.Stop()
	for {
		select {
		case t := <-r.idle:
			if err := handshake(t); err != nil {
				r.Logf("dropped a tunnel that did not answer: %v", err)
				_ = t.Close()
				continue
			}
			r.Logf("client %s paired (%d idle tunnels left)", c.RemoteAddr(), len(r.idle))
			Splice(c, t)
			return
		case <-deadline.C:
			r.Logf("client %s: no tunnel from the harness in %s: closed", c.RemoteAddr(), r.Wait)
			_ = c.Close()
			return
		case <-ctx.Done():
			_ = c.Close()
			return
		}
	}
}

// handshake tells an idle tunnel a client came, and waits for its Ack.
func handshake(t net.Conn) error {
	_ = t.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := t.Write([]byte{msgGo}); err != nil {
		return err
	}
	var b [1]byte
	if _, err := io.ReadFull(t, b[:]); err != nil {
		return err
	}
	if b[0] != msgAck {
		return fmt.Errorf("answered %q, want %q", b[0], msgAck)
	}
	return t.SetDeadline(time.Time{})
}

// Splice copies bytes both ways until either side ends, then closes both.
func Splice(a, b net.Conn) {
	var once sync.Once
	closeBoth := func() {
		_ = a.Close()
		_ = b.Close()
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		once.Do(closeBoth)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}
