package framework

import (
	"context"
	"fmt"
	"io"
	"net"

	"k8s.io/client-go/rest"
)

// Tunnel is a local listener whose every connection is carried to a pod's
// port over a port-forward of its own. Unlike one ForwardPort, it outlives
// the pod: when a pod is killed and its StatefulSet recreates it under the
// same name, the next connection reaches the new pod. A client with a
// reconnect loop (gRPC, etcd's client) therefore rides through pod kills
// the way it would inside the cluster.
type Tunnel struct {
	// Addr is the local address (127.0.0.1:port) to dial.
	Addr string
	// Namespace, Pod and Port name the target.
	Namespace, Pod string
	Port           int

	cfg *rest.Config
	ln  net.Listener
}

// OpenTunnel listens on a free local port and carries connections to
// namespace/pod:port until ctx ends (which also ends every carried
// connection) or Close is called.
func OpenTunnel(ctx context.Context, cfg *rest.Config, namespace, pod string, port int) (*Tunnel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &Tunnel{Addr: ln.Addr().String(), Namespace: namespace, Pod: pod, Port: port, cfg: cfg, ln: ln}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	go t.serve(ctx)
	return t, nil
}

func (t *Tunnel) serve(ctx context.Context) {
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			return
		}
		// A connection that cannot reach the pod (gone, not yet back) is
		// closed: the client sees a refused connection and retries.
		go t.carry(ctx, conn)
	}
}

func (t *Tunnel) carry(ctx context.Context, conn net.Conn) {
	defer func() { _ = conn.Close() }()
	pf, err := ForwardPort(ctx, t.cfg, t.Namespace, t.Pod, t.Port)
	if err != nil {
		return
	}
	defer pf.Close()
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", pf.Local))
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close is not carried through a port-forward stream: close
		// both sides when either direction ends.
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(up, conn)
	go pipe(conn, up)
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Close stops accepting new connections; those being carried end with the
// context given to OpenTunnel (or when either side closes).
func (t *Tunnel) Close() { _ = t.ln.Close() }
