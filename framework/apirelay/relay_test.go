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

// serving starts a relay on loopback that waits wait for a tunnel; it
// returns the relay and the addresses of its clients' and tunnels' ports.
func serving(t testing.TB, wait time.Duration) (r *Relay, clients, tunnels string) {
	t.Helper()
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	r = &Relay{Clients: cl, Tunnels: tl, Wait: wait, Logf: t.Logf}
	go func() { defer close(done); _ = r.Serve(ctx) }()
	return r, cl.Addr().String(), tl.Addr().String()
}

// tunnelling runs the harness's tunnels to target through the relay's
// tunnels port, idle of them waiting.
func tunnelling(t testing.TB, tunnels, target string, idle int) *Tunnels {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	tun := &Tunnels{
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", tunnels)
		},
		Target: target, Idle: idle, Logf: t.Logf,
	}
	go func() { defer close(done); tun.Run(ctx) }()
	return tun
}

// relayed starts a relay on loopback and the harness's tunnels to target;
// it returns the relay's client address.
func relayed(t testing.TB, target string, idle int) (string, *Tunnels) {
	t.Helper()
	_, clients, tunnels := serving(t, 5*time.Second)
	return clients, tunnelling(t, tunnels, target, idle)
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
	r, clients, tunnels := serving(t, 5*time.Second)

	dial := func() net.Conn {
		c, err := net.Dial("tcp", tunnels)
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	probe := dial() // says nothing
	defer func() { _ = probe.Close() }()
	other := dial()
	_, _ = other.Write([]byte{Version + 1})
	gone := dial()
	_, _ = gone.Write([]byte{Version})
	g.Eventually(func() int { return len(r.queue()) }).WithTimeout(5*time.Second).Should(Equal(1), "the gone tunnel is queued")
	_ = gone.Close()

	tunnelling(t, tunnels, echo.Addr().String(), 1)

	c, err := net.Dial("tcp", clients)
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
	_, clients, _ := serving(t, 200*time.Millisecond)
	c, err := net.Dial("tcp", clients)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	g.Expect(err).To(MatchError(io.EOF))
}
