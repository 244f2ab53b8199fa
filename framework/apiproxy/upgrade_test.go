package apiproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// A request that switches protocols (an exec over SPDY) goes through the
// proxy to an API server that also speaks HTTP/2, with no Accept the
// client did not send (client-go's SPDY executor sends none, and the API
// server refuses a command's stream asked for as JSON with 406), and the
// stream it opens carries bytes both ways.
func TestUpgradeGoesThrough(t *testing.T) {
	g := NewWithT(t)
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "SPDY/3.1" {
			http.Error(w, "upgrade expected", http.StatusBadRequest)
			return
		}
		if a := r.Header.Get("Accept"); a != "" {
			// As the API server does for a command's stream asked for as JSON.
			http.Error(w, "Not Acceptable: "+a, http.StatusNotAcceptable)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		_ = rw.Flush()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(rw, buf); err == nil {
			_, _ = rw.Write(buf)
			_ = rw.Flush()
		}
	}))
	upstream.EnableHTTP2 = true
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	p, err := Start(&rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, 1)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Close() })

	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(p.CAData())).To(BeTrue())
	conn, err := tls.Dial("tcp", p.ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, "POST /api/v1/namespaces/db/pods/a/exec?command=ls HTTP/1.1\r\nHost: api\r\n"+
		"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusSwitchingProtocols), "the proxy's answer: %s", resp.Status)
	_, err = io.WriteString(conn, "ping")
	g.Expect(err).NotTo(HaveOccurred())
	got := make([]byte, 4)
	_, err = io.ReadFull(br, got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal("ping"), "the stream carries bytes both ways")
}
