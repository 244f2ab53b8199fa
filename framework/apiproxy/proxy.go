// Package apiproxy puts a proxy between an operator and the Kubernetes API
// server, so that what the operator sees can be perturbed whatever language
// it is written in: API errors, latency, reset connections and requests
// left to time out; watch events delayed, dropped or coalesced; reads
// answered from a lagging cache; a callback right after the Nth write.
// Rules match by verb, resource, subresource, namespace, name and labels,
// are seeded, and every action is recorded (Injected).
//
// The proxy never acts with credentials of its own: it trusts the API
// server's CA and forwards each request with the Authorization header the
// operator sent, so the operator can do through it exactly what its own
// token allows and nothing more.
//
// To read what it forwards, the proxy asks the API server for JSON
// whenever the client accepts it (client-go's protobuf clients also accept
// */*). A client that accepts only protobuf is forwarded untouched, and
// rules on its events, stale reads and labels cannot apply to it.
package apiproxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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

	labels   labelCache
	records  recorder
	versions versions
	writes   atomic.Int64
	// labelRules counts armed rules with Labels: without any, requests
	// are not looked into for labels.
	labelRules atomic.Int32
	// beforeWrite is called with each write before it is acted on.
	beforeWrite atomic.Pointer[func(Info)]

	mu       sync.Mutex
	rules    []*armed
	nextID   uint64
	requests []Request
	injected []Injection
	streams  map[*stream]struct{}
	// lastWrites is each resource's last successful write (LastWrites).
	lastWrites map[string]Request
	// answered is when the last request other than a watch was answered
	// (LastAnswered).
	answered time.Time
	// delivered is each object's last event a JSON watch handed on to
	// its client: its resourceVersion, and when.
	delivered map[objKey]deliveredEvent
	rng       *rand.Rand
}

// Options place the proxy where clients on other machines (pods of a
// kind cluster) reach it.
type Options struct {
	// Listen is the address to listen on (default 127.0.0.1:0, a free
	// loopback port).
	Listen string
	// IPs are further addresses clients reach the proxy at; its serving
	// certificate names them.
	IPs []net.IP
	// ErrorLog receives the proxy's own errors: a client's broken TLS
	// handshake, a request its client gave up on (default: the log
	// package's standard logger).
	ErrorLog *log.Logger
}

// Start listens on a free loopback port and forwards to the API server
// upstream names (its host and CA only; its credentials are not used).
// seed drives every probabilistic rule, so a run replays.
func Start(upstream *rest.Config, seed uint64) (*Proxy, error) {
	return StartWith(upstream, seed, Options{})
}

// StartWith is Start with the listening address and certificate names of o.
func StartWith(upstream *rest.Config, seed uint64, o Options) (*Proxy, error) {
	u, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: upstream host %q: %w", upstream.Host, err)
	}
	transport, err := upstreamTransport(upstream)
	if err != nil {
		return nil, err
	}
	cert, caPEM, err := servingCert(o.IPs)
	if err != nil {
		return nil, err
	}
	listen := o.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: listening: %w", err)
	}
	p := newProxy(seed)
	p.upstream, p.ln, p.caPEM = u, ln, caPEM
	p.rp = &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { rewrite(r, u) },
		ModifyResponse: p.modifyResponse,
		Transport:      transport,
		FlushInterval:  -1, // watches stream event by event
		ErrorLog:       o.ErrorLog,
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		TLSConfig:         tlsServerConfig(cert),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          o.ErrorLog,
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

// BeforeWrite has h called with each write request (create, update,
// patch, delete; a leader-election lock's renewal aside) before the proxy
// acts on it or forwards it, in the request's goroutine: an oracle that
// judges the state a write acts on (nil: none). The writer waits for h.
func (p *Proxy) BeforeWrite(h func(Info)) {
	if h == nil {
		p.beforeWrite.Store(nil)
		return
	}
	p.beforeWrite.Store(&h)
}

// Port is the port the proxy listens on.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Reseed restarts the random source of probabilistic rules from seed, so
// that a scenario's draws do not depend on what ran before it.
func (p *Proxy) Reseed(seed uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rng = rand.New(rand.NewPCG(seed, seed^0x5eed))
}

func newProxy(seed uint64) *Proxy {
	return &Proxy{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), streams: map[*stream]struct{}{}}
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
	for _, s := range p.openStreams() {
		s.close(false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return p.srv.Close()
	}
	return err
}

// LastAnswered is when the proxy last answered a request other than a
// watch (zero before any): a client that has stopped asking has nothing
// left to do, or waits.
func (p *Proxy) LastAnswered() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answered
}

// Requests is every request the proxy saw, oldest first, with what was
// injected into it.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

type deliveredEvent struct {
	resourceVersion string
	at              time.Time
}

// Delivered is the resourceVersion of the last ADDED or MODIFIED event of
// an object that a watch through the proxy handed on to its client (what
// the client has seen of it at the latest), and when it was handed on.
// "" when no watch decoded as JSON carried it (a protobuf-only client's
// stream is not read).
func (p *Proxy) Delivered(resource, namespace, name string) (resourceVersion string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.delivered[objKey{resource, namespace, name}]
	return d.resourceVersion, d.at
}

// Seen says whether the proxy's clients have seen the object at
// resourceVersion rv or later (a watch handed on its event) and have made
// no write in its namespace for quiet since then, leaving out writes to
// the resources named in except (leases, events): the client has acted
// on the change. When no watch the proxy reads carried the object, it
// waits while such a watch is open on its resource (the event is on its
// way); with none (a protobuf-only client) nothing can be known and it
// says yes. Else why says what it waits for.
func (p *Proxy) Seen(obj Info, rv string, quiet time.Duration, except ...string) (seen bool, why string) {
	got, at := p.Delivered(obj.Resource, obj.Namespace, obj.Name)
	if got == "" {
		if p.readsWatchOf(obj.Resource, obj.Namespace) {
			// Not yet delivered, rather than never readable: a watch
			// the proxy decodes covers it.
			return false, "its watch has not delivered it yet"
		}
		return true, ""
	}
	if !atLeast(got, rv) {
		return false, "its watch has delivered resourceVersion " + got
	}
	last := ""
	for _, q := range p.LastWrites() {
		if end := q.At.Add(q.Took); q.Info.Namespace == obj.Namespace && !slices.Contains(except, q.Info.Resource) && end.After(at) {
			at, last = end, q.Info.String()
		}
	}
	if time.Since(at) < quiet {
		return false, "seen; the client still writes (" + last + ")"
	}
	return true, ""
}

// readsWatchOf says whether a watch the proxy decodes (JSON, not a
// protobuf-only client's) is open on resource in namespace or across all
// namespaces: an object created there will be delivered through it.
func (p *Proxy) readsWatchOf(resource, namespace string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.streams {
		if !s.opaque && s.info.Resource == resource && s.info.Subresource == "" && (s.info.Namespace == "" || s.info.Namespace == namespace) {
			return true
		}
	}
	return false
}

// atLeast compares two resourceVersions as the numbers etcd makes them,
// or, when one is not a number, as equal or not.
func atLeast(rv, want string) bool {
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(want, 10, 64)
	if errA != nil || errB != nil {
		return rv == want
	}
	return a >= b
}

// LastWrites is, per namespace and resource (with its subresource:
// "db pods", "db rabbitmqclusters/status"; cluster-scoped ones under
// " nodes"), the last state write (Request.StateWrite: a 2xx that changed
// something, leader-election locks aside).
func (p *Proxy) LastWrites() map[string]Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.lastWrites)
}

// Writes is how many writes (create, update, patch, delete,
// deletecollection) were answered with a 2xx so far.
func (p *Proxy) Writes() int { return int(p.writes.Load()) }

// exchange is one request on its way through the proxy.
type exchange struct {
	ctx   context.Context // the client's: done when it gives up
	start time.Time
	info  Info
	query url.Values
	view  labelView
	// json says the client accepts JSON, so the proxy asks for it (accept)
	// and may read and rewrite the answer.
	json   bool
	accept string
	rule   *armed // the rule acting on the request as it arrives
	// injected is the rule's description once it did act.
	injected string
	// noop says the write was answered with the object at the version it
	// already had: it changed nothing.
	noop bool
}

type exchangeKey struct{}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	x := &exchange{ctx: r.Context(), start: time.Now(), info: parseRequest(r), query: r.URL.Query()}
	// A request that switches protocols (exec, attach, port-forward)
	// carries a stream, not an object: its headers go on as they came.
	if x.info.Resource != "" && r.Header.Get("Upgrade") == "" {
		x.accept, x.json = negotiate(r.Header.Get("Accept"))
		if x.info.Verb == "watch" || p.labelRules.Load() > 0 {
			x.view = p.viewLabels(r, x.info)
		}
	}
	lock := isLockWrite(r, x.info)
	if h := p.beforeWrite.Load(); h != nil && writeVerbs[x.info.Verb] && !lock {
		(*h)(x.info)
	}
	var after []*armed
	x.rule, after = p.matchRequest(x.info, x.view)
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	p.act(rec, r, x)
	req := Request{At: x.start, Info: x.info, Status: rec.status, Injected: x.injected, Took: time.Since(x.start), Lock: lock, NoOp: x.noop}
	p.mu.Lock()
	p.requests = append(p.requests, req)
	if x.info.Verb != "watch" {
		p.answered = time.Now()
	}
	if req.StateWrite() {
		if p.lastWrites == nil {
			p.lastWrites = map[string]Request{}
		}
		key := x.info.Namespace + " " + x.info.Resource
		if x.info.Subresource != "" {
			key += "/" + x.info.Subresource
		}
		p.lastWrites[key] = req
	}
	p.mu.Unlock()
	if writeVerbs[x.info.Verb] && rec.status/100 == 2 {
		p.writes.Add(1)
		if len(after) > 0 {
			p.countWrite(after, req)
		}
	}
}

// act answers the request as its rule says, or forwards it.
func (p *Proxy) act(w *statusRecorder, r *http.Request, x *exchange) {
	rule := x.rule
	switch {
	case rule == nil:
		p.forward(w, r, x)
	case rule.Stale:
		p.serveStale(w, r, x)
	case rule.Timeout:
		p.holdUntilTimeout(w, r, x)
	default:
		x.injected = rule.desc
		delayed := ""
		if rule.Delay > 0 {
			t := time.NewTimer(rule.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
			}
			t.Stop()
			delayed = " after " + round(time.Since(x.start)).String()
		}
		switch {
		case rule.Reset:
			p.inject(rule.desc, x.info, "reset the connection%s", delayed)
			w.status = 0
			reset(w.ResponseWriter)
		case rule.Status != 0:
			p.inject(rule.desc, x.info, "answered %d%s", rule.Status, delayed)
			writeStatus(w, rule.Status, rule.RetryAfter, x.info)
		default:
			p.inject(rule.desc, x.info, "delayed the request %s", round(time.Since(x.start)))
			p.forward(w, r, x)
		}
	}
}

// forward sends the request on, with its exchange for modifyResponse.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, x *exchange) {
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x)))
}

// rewrite aims the request at the API server and, when the client accepts
// JSON, asks for JSON, uncompressed, so that the proxy can read it.
func rewrite(r *httputil.ProxyRequest, u *url.URL) {
	r.SetURL(u)
	r.Out.Host = u.Host
	if x, ok := r.In.Context().Value(exchangeKey{}).(*exchange); ok && x.json {
		// No Accept stays none: the API server answers objects as JSON
		// then, and would refuse a JSON-only ask for what is not an object.
		if r.In.Header.Get("Accept") != "" {
			r.Out.Header.Set("Accept", x.accept)
		}
		// The transport asks for gzip itself and inflates what it gets.
		r.Out.Header.Del("Accept-Encoding")
	}
}

// modifyResponse looks into what the API server answered: watch streams
// go through the event rules; JSON answers to reads are recorded (for
// Stale) and teach the label cache.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	x, ok := resp.Request.Context().Value(exchangeKey{}).(*exchange)
	if !ok || x.info.Resource == "" {
		return nil
	}
	if x.info.Verb == "watch" {
		if resp.StatusCode == http.StatusOK {
			p.watch(x, resp)
		}
		return nil
	}
	if !x.json || resp.StatusCode/100 != 2 || !isJSON(resp.Header.Get("Content-Type")) {
		return nil
	}
	body, err := readBody(resp)
	if err != nil || body == nil {
		return err
	}
	if o, ok := readAnswer(body); ok {
		p.labels.learn(x.info, o)
		x.noop = p.versions.answered(x.info, o)
	}
	if x.info.Verb == "get" || x.info.Verb == "list" {
		p.records.add(staleKey(x), record{
			at: time.Now(), status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body,
		})
	}
	return nil
}
