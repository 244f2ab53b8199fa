// Package apiproxy puts a proxy between an operator and the Kubernetes API
// server, so that what the operator sees can be perturbed whatever language
// it is written in: API errors, latency and reset connections, matched by
// verb, resource, namespace and name, seeded and recorded.
//
// The proxy never acts with credentials of its own: it trusts the API
// server's CA and forwards each request with the Authorization header the
// operator sent, so the operator can do through it exactly what its own
// token allows and nothing more.
package apiproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy is a running proxy in front of one API server.
type Proxy struct {
	upstream *url.URL
	rp       *httputil.ReverseProxy
	srv      *http.Server
	ln       net.Listener
	caPEM    []byte

	mu       sync.Mutex
	rules    []*Rule
	requests []Request
	rng      *rand.Rand
}

// Start listens on a free loopback port and forwards to the API server
// upstream names (its host and CA only; its credentials are not used).
// seed drives every probabilistic rule, so a run replays.
func Start(upstream *rest.Config, seed uint64) (*Proxy, error) {
	u, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: upstream host %q: %w", upstream.Host, err)
	}
	transport, err := upstreamTransport(upstream)
	if err != nil {
		return nil, err
	}
	cert, caPEM, err := servingCert()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("apiproxy: listening: %w", err)
	}
	p := &Proxy{upstream: u, ln: ln, caPEM: caPEM, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream event by event
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		TLSConfig:         tlsServerConfig(cert),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

// Config is a client configuration that reaches the API server through
// the proxy with token, the operator's own bearer token.
func (p *Proxy) Config(token string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + p.ln.Addr().String(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM},
	}
}

// URL is where the proxy listens (https://127.0.0.1:<port>).
func (p *Proxy) URL() string { return "https://" + p.ln.Addr().String() }

// CAData is the PEM of the CA the proxy's serving certificate chains to.
func (p *Proxy) CAData() []byte { return p.caPEM }

// Close stops the proxy; open watches end.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return p.srv.Close()
	}
	return err
}

// Add arms a rule; rules are tried in the order they were added and the
// first that matches a request acts on it.
func (p *Proxy) Add(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

// Clear disarms every rule.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Requests is every request the proxy saw, oldest first, with what was
// injected into it.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := parseRequest(r)
	rule := p.match(info)
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	injected := ""
	if rule != nil {
		injected = rule.String()
		if rule.Delay > 0 {
			select {
			case <-time.After(rule.Delay):
			case <-r.Context().Done():
			}
		}
	}
	switch {
	case rule != nil && rule.Reset:
		rec.status = 0
		reset(w)
	case rule != nil && rule.Status != 0:
		writeStatus(rec, rule, info)
	default:
		p.rp.ServeHTTP(rec, r)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, Request{At: start, Info: info, Status: rec.status, Injected: injected, Took: time.Since(start)})
}

// match finds the first armed rule for the request and counts its use.
func (p *Proxy) match(info Info) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if !r.matches(info) || (r.Count > 0 && r.used >= r.Count) {
			continue
		}
		if r.Probability > 0 && p.rng.Float64() >= r.Probability {
			continue
		}
		r.used++
		return r
	}
	return nil
}

// reset closes the client's connection without an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	// Under TLS the hijacked connection wraps the TCP one; without
	// lingering, closing it sends a reset, not an orderly goodbye.
	if tc, ok := conn.(*tls.Conn); ok {
		if tcp, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
	}
	_ = conn.Close()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
