package apiproxy

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// fakeAPI is an upstream that answers like an API server for one
// ConfigMap, "a" in "db", and streams the watch events a test sends.
type fakeAPI struct {
	events  chan string
	mu      sync.Mutex
	value   string
	accepts []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.accepts = append(f.accepts, r.Header.Get("Accept"))
	value := f.value
	f.mu.Unlock()
	ct := "application/json" // also for no Accept, as the API server answers
	if a := r.Header.Get("Accept"); a != "" && !strings.Contains(a, "json") {
		ct = "application/vnd.kubernetes.protobuf"
	}
	w.Header().Set("Content-Type", ct)
	cm := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"db","labels":{"app":"db"}},"data":{"k":%q}}`, value)
	switch {
	case r.URL.Query().Get("watch") == "true":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case e := <-f.events:
				_, _ = io.WriteString(w, e+"\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/configmaps"):
		_, _ = fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[%s]}`, cm)
	default:
		_, _ = io.WriteString(w, cm)
	}
}

func (f *fakeAPI) set(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.value = v
}

func (f *fakeAPI) lastAccept() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepts[len(f.accepts)-1]
}

// startFake starts a fake API server and a proxy in front of it, and
// returns a client of the proxy.
func startFake(t *testing.T) (*fakeAPI, *Proxy, *http.Client, string) {
	t.Helper()
	f := &fakeAPI{events: make(chan string), value: "v1"}
	p, c, base := startBefore(t, f)
	return f, p, c, base
}

// startBefore starts a proxy in front of upstream, served over TLS, and
// returns a client of the proxy.
func startBefore(t *testing.T, api http.Handler) (*Proxy, *http.Client, string) {
	t.Helper()
	upstream := httptest.NewUnstartedServer(api)
	upstream.EnableHTTP2 = true
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	p, err := Start(&rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := rest.HTTPClientFor(p.Config("t"))
	if err != nil {
		t.Fatal(err)
	}
	return p, c, p.URL()
}

func do(t *testing.T, c *http.Client, method, url, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// openWatch watches configmaps in db through the proxy and passes on each
// event as "TYPE name@rv" (a 410 ERROR as "ERROR 410"), then "EOF".
func openWatch(t *testing.T, c *http.Client, base string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/namespaces/db/configmaps?watch=true", nil)
	req.Header.Set("Accept", "application/json, */*")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 100)
	go func() {
		defer func() { _ = resp.Body.Close() }()
		dec := json.NewDecoder(resp.Body)
		for {
			var e struct {
				Type   string
				Object struct {
					Code     int
					Metadata objMeta
				}
			}
			if dec.Decode(&e) != nil {
				out <- "EOF"
				return
			}
			if e.Type == "ERROR" {
				out <- fmt.Sprint("ERROR ", e.Object.Code)
				continue
			}
			out <- fmt.Sprintf("%s %s@%s", e.Type, e.Object.Metadata.Name, e.Object.Metadata.ResourceVersion)
		}
	}()
	return out
}

func event(typ, name, rv string) string {
	return fmt.Sprintf(`{"type":%q,"object":{"kind":"ConfigMap","metadata":{"name":%q,"namespace":"db","resourceVersion":%q,"labels":{"app":"db"}}}}`, typ, name, rv)
}

func bookmark(rv string) string {
	return fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":%q}}}`, rv)
}

func whats(p *Proxy) []string {
	var out []string
	for _, in := range p.Injected() {
		out = append(out, in.What)
	}
	return out
}

func TestWatchEventRules(t *testing.T) {
	g := NewWithT(t)
	f, p, c, base := startFake(t)
	got := openWatch(t, c, base)
	next := func() string {
		select {
		case e := <-got:
			return e
		case <-time.After(5 * time.Second):
			return "nothing within 5s"
		}
	}
	f.events <- event("ADDED", "a", "1")
	g.Expect(next()).To(Equal("ADDED a@1"))
	delivered := func() string { rv, _ := p.Delivered("configmaps", "db", "a"); return rv }
	g.Eventually(delivered).Should(Equal("1"), "what the client has seen of a")

	drop, err := p.Add(Rule{Resource: "configmaps", Name: "a", Events: EventsDrop})
	g.Expect(err).NotTo(HaveOccurred())
	f.events <- event("MODIFIED", "a", "2")
	f.events <- event("MODIFIED", "b", "3")
	f.events <- bookmark("4")
	g.Expect([]string{next(), next()}).To(Equal([]string{"MODIFIED b@3", "BOOKMARK @4"}), "a's event dropped, the bookmark passes")
	g.Expect(delivered()).To(Equal("1"), "a dropped event was not seen")
	p.Remove(drop)

	hold, _ := p.Add(Rule{Resource: "configmaps", Name: "a", Events: EventsDelay})
	f.events <- event("MODIFIED", "a", "5")
	f.events <- event("MODIFIED", "b", "6")
	g.Consistently(got).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "b waits behind the held a")
	p.Remove(hold)
	g.Expect([]string{next(), next()}).To(Equal([]string{"MODIFIED a@5", "MODIFIED b@6"}), "in order once removed")
	g.Eventually(delivered).Should(Equal("5"), "a held event is seen once delivered")

	co, _ := p.Add(Rule{Resource: "configmaps", Name: "a", Events: EventsCoalesce})
	for _, e := range []string{event("MODIFIED", "a", "7"), event("MODIFIED", "a", "8"), event("MODIFIED", "b", "9"), event("MODIFIED", "a", "10")} {
		f.events <- e
	}
	g.Consistently(got).WithTimeout(300 * time.Millisecond).ShouldNot(Receive())
	p.Remove(co)
	g.Expect([]string{next(), next()}).To(Equal([]string{"MODIFIED b@9", "MODIFIED a@10"}))

	timed, _ := p.Add(Rule{Resource: "configmaps", Events: EventsDelay, Delay: 300 * time.Millisecond})
	start := time.Now()
	f.events <- event("MODIFIED", "b", "11")
	g.Expect(next()).To(Equal("MODIFIED b@11"))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
	p.Remove(timed)

	g.Expect(p.CloseWatches(Rule{Resource: "configmaps", Namespace: "db"}, true)).To(Equal(1))
	g.Expect([]string{next(), next()}).To(Equal([]string{"ERROR 410", "EOF"}))
	g.Expect(p.CloseWatches(Rule{Resource: "configmaps"}, true)).To(Equal(0), "already closed")

	g.Expect(whats(p)).To(HaveExactElements(
		"dropped MODIFIED configmaps db/a",
		HavePrefix("delayed "), // a@5, held until removed
		HavePrefix("delayed "), // b@6, behind it
		"coalesced 3 events of configmaps db/a into MODIFIED",
		HaveSuffix("MODIFIED configmaps db/b behind held events"), // b@9
		MatchRegexp(`^delayed [\d.]+m?s MODIFIED configmaps db/b$`),
		"expired the watch (410 Expired)",
	))
	g.Expect(p.Injected()[2].What).To(HaveSuffix("MODIFIED configmaps db/b behind held events"))
	g.Expect(p.Injected()[2].Rule).To(BeEmpty())
	g.Expect(p.Injected()[0].Rule).To(Equal("drop events of watch configmaps */a"))
	g.Expect(p.Injected()[6].Rule).To(Equal("expire watches of configmaps db/*"))
}

func TestStaleReads(t *testing.T) {
	g := NewWithT(t)
	f, p, c, base := startFake(t)
	get := base + "/api/v1/namespaces/db/configmaps/a"
	list := base + "/api/v1/namespaces/db/configmaps?limit=500"
	_, body := do(t, c, "GET", get+"?resourceVersion=0", "")
	g.Expect(body).To(ContainSubstring(`"v1"`))
	_, body = do(t, c, "GET", list, "application/json")
	g.Expect(body).To(ContainSubstring(`"v1"`))
	f.set("v2")

	lagging, err := p.Add(Rule{Resource: "configmaps", Stale: true, Lag: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	_, body = do(t, c, "GET", get, "")
	g.Expect(body).To(ContainSubstring(`"v2"`), "nothing recorded an hour ago: forwarded")
	p.Remove(lagging)

	id, _ := p.Add(Rule{Resource: "configmaps", Stale: true})
	code, body := do(t, c, "GET", get, "application/vnd.kubernetes.protobuf, */*")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"v1"`), "answered as recorded")
	_, body = do(t, c, "GET", list+"&resourceVersion=7&timeoutSeconds=3", "")
	g.Expect(body).To(ContainSubstring(`"v1"`))
	_, body = do(t, c, "GET", base+"/api/v1/namespaces/db/configmaps?limit=1", "")
	g.Expect(body).To(ContainSubstring(`"v2"`), "another query was never recorded")
	code, _ = do(t, c, "GET", get, "application/vnd.kubernetes.protobuf")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(f.lastAccept()).To(Equal("application/vnd.kubernetes.protobuf"), "forwarded untouched")
	p.Remove(id)
	_, body = do(t, c, "GET", get, "")
	g.Expect(body).To(ContainSubstring(`"v2"`))
	g.Expect(whats(p)).To(HaveExactElements(
		MatchRegexp(`^served the get recorded at \d\d:\d\d:\d\d\.\d\d\d$`),
		HavePrefix("served the list recorded at "),
		"not applied: client accepts only protobuf",
	))
	g.Expect(p.Requests()[4].Injected).To(Equal("stale (lag 0s) list,get,watch configmaps"))
}

func TestAfterWrites(t *testing.T) {
	g := NewWithT(t)
	_, p, c, base := startFake(t)
	fired := make(chan Request, 10)
	_, err := p.Add(Rule{Verb: "create", Count: 1, Status: http.StatusConflict})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Add(Rule{Resource: "configmaps", After: 2, Then: func(r Request) { fired <- r }})
	g.Expect(err).NotTo(HaveOccurred())
	cms := base + "/api/v1/namespaces/db/configmaps"
	code, _ := do(t, c, "POST", cms, "")
	g.Expect(code).To(Equal(http.StatusConflict), "answered 409: not a write that succeeded")
	do(t, c, "GET", cms+"/a", "")
	do(t, c, "POST", cms, "")
	g.Expect(fired).NotTo(Receive())
	do(t, c, "PATCH", cms+"/a", "")
	do(t, c, "PATCH", cms+"/a", "")
	var r Request
	g.Eventually(fired).WithTimeout(5 * time.Second).Should(Receive(&r))
	g.Expect(r.Info.String()).To(Equal("patch configmaps db/a"))
	g.Expect(r.Status).To(Equal(http.StatusOK))
	g.Consistently(fired).WithTimeout(200*time.Millisecond).ShouldNot(Receive(), "once")
	g.Expect(p.Writes()).To(Equal(3))
	g.Expect(whats(p)).To(Equal([]string{"answered 409", "after 2nd write: then"}))
}

func TestTimeout(t *testing.T) {
	g := NewWithT(t)
	_, p, c, base := startFake(t)
	_, err := p.Add(Rule{Verb: "get", Count: 1, Timeout: true, TimeoutAfter: 200 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	code, body := do(t, c, "GET", base+"/api/v1/namespaces/db/configmaps/a", "")
	g.Expect(code).To(Equal(http.StatusGatewayTimeout))
	g.Expect(body).To(ContainSubstring(`"kind":"Status"`))

	_, _ = p.Add(Rule{Verb: "get", Count: 1, Timeout: true})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/namespaces/db/configmaps/a", nil)
	_, err = c.Do(req)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Eventually(func() []string { return whats(p) }).WithTimeout(5 * time.Second).Should(HaveExactElements(
		MatchRegexp(`^held the request 2\d\dms, answered 504$`),
		MatchRegexp(`^held the request until the client gave up after [12]\d\dms$`),
	))
}

func TestProtobufOnlyWatch(t *testing.T) {
	g := NewWithT(t)
	f, p, c, base := startFake(t)
	_, _ = p.Add(Rule{Resource: "configmaps", Events: EventsDrop})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/namespaces/db/configmaps?watch=true", nil)
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(f.lastAccept()).To(Equal("application/vnd.kubernetes.protobuf"))
	f.events <- event("MODIFIED", "a", "2")
	line := make([]byte, 4096)
	n, err := resp.Body.Read(line)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(line[:n])).To(ContainSubstring(`"name":"a"`), "passed through untouched, not dropped")
	g.Expect(whats(p)).To(Equal([]string{"not applied: client accepts only protobuf"}))
	g.Expect(p.CloseWatches(Rule{}, true)).To(Equal(1))
	_, err = io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred(), "the stream ends cleanly")
	g.Expect(whats(p)).To(ContainElement("closed the watch (not expired: client accepts only protobuf)"))
}

func TestAcceptAskedUpstream(t *testing.T) {
	g := NewWithT(t)
	f, _, c, base := startFake(t)
	do(t, c, "GET", base+"/api/v1/namespaces/db/configmaps/a", "application/vnd.kubernetes.protobuf, */*")
	g.Expect(f.lastAccept()).To(Equal("application/json"))
	do(t, c, "GET", base+"/version", "application/vnd.kubernetes.protobuf, */*")
	g.Expect(f.lastAccept()).To(Equal("application/vnd.kubernetes.protobuf, */*"), "not a resource: untouched")
	do(t, c, "GET", base+"/api/v1/namespaces/db/configmaps/a", "")
	g.Expect(f.lastAccept()).To(BeEmpty(), "no Accept stays none")
}

func TestBeforeWriteSeesWritesFirst(t *testing.T) {
	g := NewWithT(t)
	f, p, c, base := startFake(t)
	var seen []string
	p.BeforeWrite(func(i Info) {
		// The write has not reached the API server yet: it counts the
		// requests before it.
		f.mu.Lock()
		seen = append(seen, fmt.Sprintf("%s after %d", i, len(f.accepts)))
		f.mu.Unlock()
	})
	cms := base + "/api/v1/namespaces/db/configmaps"
	do(t, c, "GET", cms+"/a", "")
	do(t, c, "DELETE", cms+"/a", "")
	do(t, c, "PATCH", cms+"/a", "")
	p.BeforeWrite(nil)
	do(t, c, "DELETE", cms+"/b", "")
	g.Expect(seen).To(Equal([]string{"delete configmaps db/a after 1", "patch configmaps db/a after 2"}), "each write, before it is sent; no read; none once removed")
}

// A client has seen an object once its watch handed on the object at the
// version asked for or later, and it has acted on it once it made no
// write in the object's namespace for the quiet time since.
func TestSeen(t *testing.T) {
	g := NewWithT(t)
	f, p, c, base := startFake(t)
	a := Info{Resource: "configmaps", Namespace: "db", Name: "a"}
	seen, _ := p.Seen(a, "7", time.Hour)
	g.Expect(seen).To(BeTrue(), "no watch carried it: nothing to wait for")

	got := openWatch(t, c, base)
	seen, why := p.Seen(Info{Resource: "configmaps", Namespace: "db", Name: "new"}, "1", 0)
	g.Expect(seen).To(BeFalse(), "a watch the proxy reads covers it: its event is on its way")
	g.Expect(why).To(Equal("its watch has not delivered it yet"))
	f.events <- event("MODIFIED", "a", "7")
	g.Eventually(got).Should(Receive(Equal("MODIFIED a@7")))
	g.Eventually(func() string { rv, _ := p.Delivered("configmaps", "db", "a"); return rv }).Should(Equal("7"))
	seen, why = p.Seen(a, "8", 0)
	g.Expect(seen).To(BeFalse())
	g.Expect(why).To(Equal("its watch has delivered resourceVersion 7"))
	seen, _ = p.Seen(a, "7", 0)
	g.Expect(seen).To(BeTrue())

	status, _ := do(t, c, http.MethodPatch, base+"/api/v1/namespaces/db/configmaps/b", "application/json")
	g.Expect(status).To(Equal(http.StatusOK))
	seen, why = p.Seen(a, "7", time.Hour)
	g.Expect(seen).To(BeFalse(), "a write since")
	g.Expect(why).To(Equal("seen; the client still writes (patch configmaps db/b)"))
	g.Eventually(func() bool { seen, _ := p.Seen(a, "7", 200*time.Millisecond, "configmaps"); return seen }).Should(BeTrue(),
		"writes to resources left out do not count, once quiet since the delivery")
	seen, _ = p.Seen(Info{Resource: "configmaps", Namespace: "other", Name: "a"}, "7", time.Hour)
	g.Expect(seen).To(BeTrue(), "nothing delivered of it, nor written in its namespace")
}

// A leader-election record kept in a ConfigMap or Endpoints annotation
// (client-go's older locks) is renewed every few seconds: such a write is
// recorded as a lock, not as a change of state, and no oracle waits on it.
func TestLeaderLockWrites(t *testing.T) {
	g := NewWithT(t)
	_, p, c, base := startFake(t)
	var before []string
	p.BeforeWrite(func(i Info) { before = append(before, i.String()) })
	send := func(method, path, body string) {
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
	}
	record := `{"metadata":{"name":"lock","annotations":{"control-plane.alpha.kubernetes.io/leader":"{\"holderIdentity\":\"op-1\"}"}}}`
	since := time.Now()
	send(http.MethodPut, "/api/v1/namespaces/db/configmaps/lock", record)
	send(http.MethodPost, "/api/v1/namespaces/db/endpoints", record)
	send(http.MethodPut, "/api/v1/namespaces/db/configmaps/settings", `{"metadata":{"name":"settings"},"data":{"a":"b"}}`)
	send(http.MethodPut, "/api/v1/namespaces/db/secrets/lock", record)

	// The proxy records a request once it has answered it: the client
	// may read the answer first.
	g.Eventually(func() []Request { return p.Requests() }).Should(HaveLen(4))
	// Recorded in the order answered, which need not be the order sent.
	locks := map[string]bool{}
	for _, q := range p.Requests() {
		locks[q.Info.String()] = q.Lock
	}
	g.Expect(locks).To(Equal(map[string]bool{"update configmaps db/lock": true, "create endpoints db/": true,
		"update configmaps db/settings": false, "update secrets db/lock": false}), "only a ConfigMap's or Endpoints' record is a lock")
	g.Expect(StateWrites(p.Requests(), since)).To(ConsistOf("update configmaps db/settings", "update secrets db/lock"))
	g.Expect(before).To(Equal([]string{"update configmaps db/settings", "update secrets db/lock"}))
	g.Expect(p.LastWrites()).To(HaveKey("db configmaps"))
	g.Expect(p.LastWrites()).NotTo(HaveKey("db endpoints"))
}

// A write the API server answers with the object at the version the
// proxy last saw it at changed nothing: an operator that updates what it
// owns on every pass, changed or not, is not still at work.
func TestNoOpWrites(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	rv, data := 5, ""
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodGet {
			var in struct{ Data map[string]string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			if in.Data["k"] != data {
				data, rv = in.Data["k"], rv+1
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"db","resourceVersion":"%d"},"data":{"k":%q}}`, rv, data)
	})
	p, c, base := startBefore(t, api)
	send := func(method, body string) {
		req, err := http.NewRequestWithContext(t.Context(), method, base+"/api/v1/namespaces/db/configmaps/a", strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	since := time.Now()
	send(http.MethodPut, `{"data":{"k":"x"}}`)   // first seen: a change
	send(http.MethodPut, `{"data":{"k":"x"}}`)   // the same again: rv 6 stays
	send(http.MethodPatch, `{"data":{"k":"x"}}`) // likewise
	send(http.MethodGet, "")
	send(http.MethodPatch, `{"data":{"k":"y"}}`) // rv 7
	g.Eventually(func() []Request { return p.Requests() }).Should(HaveLen(5), "each recorded once answered")
	// Recorded in the order answered, which need not be the order sent.
	var noop []bool
	for _, q := range p.Requests() {
		noop = append(noop, q.NoOp)
	}
	g.Expect(noop).To(ConsistOf(false, true, true, false, false))
	g.Expect(StateWrites(p.Requests(), since)).To(ConsistOf("update configmaps db/a", "patch configmaps db/a"))
}
