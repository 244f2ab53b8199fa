package apirelay

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// relayed starts a relay on loopback and the harness's tunnels to target;
// it returns the relay's client address.
func relayed(t testing.TB, target string, idle int) (string, *Tunnels) {
	t.Helper()
	clients, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tunnels, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	r := &Relay{Clients: clients, Tunnels: tunnels, Wait: 5 * time.Second, Logf: t.Logf}
	tun := &Tunnels{
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", tunnels.Addr().String())
		},
		Target: target, Idle: idle, Logf: t.Logf,
	}
	wg.Add(2)
	go func() { defer wg.Done(); _ = r.Serve(ctx) }()
	go func() { defer wg.Done(); tun.Run(ctx) }()
	return clients.Addr().String(), tun
}

// TestRelayCarriesTLSEndToEnd: an HTTPS client reaches the harness's
// server through the relay, with the server's own certificate, on more
// connections at once than tunnels wait idle.
func TestRelayCarriesTLSEndToEnd(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	defer srv.Close()
	addr, tun := relayed(t, srv.Listener.Addr().String(), 2)

	const n = 6
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A transport of its own: a connection of its own.
			tr := srv.Client().Transport.(*http.Transport).Clone()
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(fmt.Sprintf("https://%s/%d", addr, i))
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			got[i], errs[i] = string(b), err
		}()
	}
	wg.Wait()
	for i := range n {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(got[i]).To(Equal(fmt.Sprintf("hello /%d", i)))
	}
	g.Expect(tun.Paired()).To(BeNumerically("==", n))
}

// TestRelaySkipsDeadTunnels: a probe that says nothing, a tunnel of
// another version and one whose harness side is gone do not stop the next
// client from being carried.
func TestRelaySkipsDeadTunnels(t *testing.T) {
	g := NewWithT(t)
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = echo.Close() }()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	clients, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	tunnels, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := &Relay{Clients: clients, Tunnels: tunnels, Wait: 5 * time.Second, Logf: t.Logf}
	go func() { _ = r.Serve(ctx) }()

	dial := func() net.Conn {
		c, err := net.Dial("tcp", tunnels.Addr().String())
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	probe := dial() // says nothing
	defer func() { _ = probe.Close() }()
	other := dial()
	_, _ = other.Write([]byte{Version + 1})
	gone := dial()
	_, _ = gone.Write([]byte{Version})
	g.Eventually(func() int { return len(r.idle) }).WithTimeout(5*time.Second).Should(Equal(1), "the gone tunnel is queued")
	_ = gone.Close()

	tun := &Tunnels{Dial: func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", tunnels.Addr().String())
	}, Target: echo.Addr().String(), Idle: 1, Logf: t.Logf}
	go tun.Run(ctx)

	c, err := net.Dial("tcp", clients.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Write([]byte("ping"))
	g.Expect(err).NotTo(HaveOccurred())
	b := make([]byte, 4)
	_, err = io.ReadFull(c, b)
	g.Expect(err).NotTo(HaveOccurred(), "carried by the live tunnel")
	g.Expect(string(b)).To(Equal("ping"))
}

// TestRelayClientWithoutTunnel: with no harness, a client is closed after
// the relay's wait, not held for ever.
func TestRelayClientWithoutTunnel(t *testing.T) {
	g := NewWithT(t)
	clients, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	tunnels, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = (&Relay{Clients: clients, Tunnels: tunnels, Wait: 200 * time.Millisecond}).Serve(ctx) }()
	c, err := net.Dial("tcp", clients.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	g.Expect(err).To(MatchError(io.EOF))
}
