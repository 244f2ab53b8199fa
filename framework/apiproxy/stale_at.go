package apiproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// initialEventsEnd is the annotation of the bookmark that ends a
// watch-list's initial events.
const initialEventsEnd = "k8s.io/initial-events-end"

// serveAt answers a read exactly as of resourceVersion rv, as an API
// server whose cache lags there would: a list at that version (the API
// server keeps old versions until it compacts), a get as the object was
// then, and a watch-list (client-go's informers list through a watch)
// with that version's items as its initial events, after which the
// stream stalls until the rule is removed and then ends, so the client
// watches again from rv and catches up. A plain watch goes on to the API
// server; the stream-level Stale handling holds its events.
func (p *Proxy) serveAt(w http.ResponseWriter, r *http.Request, x *exchange, rv string) {
	rule := x.rule
	if !x.json {
		p.inject(rule.desc, x.info, "not applied: client accepts only protobuf")
		p.forward(w, r, x)
		return
	}
	switch {
	case x.info.Verb == "list":
		q := r.URL.Query()
		q.Set("resourceVersion", rv)
		q.Set("resourceVersionMatch", "Exact")
		q.Del("continue")
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = q.Encode()
		x.injected = rule.desc
		p.inject(rule.desc, x.info, "served the list as of resourceVersion %s", rv)
		p.forward(w, r2, x)
	case x.info.Verb == "get":
		p.getAt(w, r, x, rv)
	case x.info.Verb == "watch" && x.query.Get("sendInitialEvents") == "true":
		p.watchListAt(w, r, x, rv)
	default:
		p.forward(w, r, x)
	}
}

// listAt lists, with the caller's credentials, the collection path at rv.
func (p *Proxy) listAt(ctx context.Context, r *http.Request, collection string, q url.Values, rv string) (*http.Response, error) {
	q.Set("resourceVersion", rv)
	q.Set("resourceVersionMatch", "Exact")
	for _, k := range []string{"watch", "sendInitialEvents", "allowWatchBookmarks", "timeoutSeconds", "continue"} {
		q.Del(k)
	}
	u := *p.upstream
	u.Path, u.RawQuery = collection, q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return p.rp.Transport.RoundTrip(req)
}

// list is the part of a JSON list the proxy needs.
type list struct {
	Kind       string            `json:"kind"`
	APIVersion string            `json:"apiVersion"`
	Items      []json.RawMessage `json:"items"`
}

// readList reads a list answer; a non-2xx answer is passed on as it is.
func readList(w http.ResponseWriter, resp *http.Response) (*list, bool) {
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode/100 != 2 {
		if err == nil {
			w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(body)
		} else {
			writeStatus(w, http.StatusBadGateway, 0, Info{})
		}
		return nil, false
	}
	l := &list{}
	if err := json.Unmarshal(body, l); err != nil {
		writeStatus(w, http.StatusBadGateway, 0, Info{})
		return nil, false
	}
	return l, true
}

// typed gives an item of a list its kind and apiVersion, which the API
// server leaves out of a list's items.
func (l *list) typed(item json.RawMessage) json.RawMessage {
	var o map[string]any
	if json.Unmarshal(item, &o) != nil {
		return item
	}
	o["kind"] = strings.TrimSuffix(l.Kind, "List")
	o["apiVersion"] = l.APIVersion
	b, err := json.Marshal(o)
	if err != nil {
		return item
	}
	return b
}

// itemsAt lists collection at rv for the request and marks it as served
// stale; on an error it has answered the client and returns false.
func (p *Proxy) itemsAt(w http.ResponseWriter, r *http.Request, x *exchange, collection string, q url.Values, rv string) (*list, bool) {
	resp, err := p.listAt(r.Context(), r, collection, q, rv)
	if err != nil {
		writeStatus(w, http.StatusBadGateway, 0, x.info)
		return nil, false
	}
	l, ok := readList(w, resp)
	if ok {
		x.injected = x.rule.desc
	}
	return l, ok
}

// getAt answers a get with the object as it was at rv, or NotFound.
func (p *Proxy) getAt(w http.ResponseWriter, r *http.Request, x *exchange, rv string) {
	if x.info.Subresource != "" {
		p.forward(w, r, x)
		return
	}
	q := url.Values{"fieldSelector": {"metadata.name=" + x.info.Name}}
	l, ok := p.itemsAt(w, r, x, path.Dir(x.info.Path), q, rv)
	if !ok {
		return
	}
	if len(l.Items) == 0 {
		p.inject(x.rule.desc, x.info, "answered NotFound: %s did not exist at resourceVersion %s", x.info.Name, rv)
		err := apierrors.NewNotFound(schema.GroupResource{Resource: x.info.Resource}, x.info.Name)
		writeJSON(w, http.StatusNotFound, status(err))
		return
	}
	p.inject(x.rule.desc, x.info, "served the object as of resourceVersion %s", rv)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(l.typed(l.Items[0]))
}

// watchListAt streams rv's items as a watch-list's initial events and
// its closing bookmark, stalls until the rule is removed, then ends.
func (p *Proxy) watchListAt(w http.ResponseWriter, r *http.Request, x *exchange, rv string) {
	l, ok := p.itemsAt(w, r, x, x.info.Path, r.URL.Query(), rv)
	if !ok {
		return
	}
	p.inject(x.rule.desc, x.info, "served the watch-list's %d initial events as of resourceVersion %s", len(l.Items), rv)
	w.Header().Set("Content-Type", "application/json;stream=watch")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	enc := json.NewEncoder(w)
	for _, it := range l.Items {
		if enc.Encode(watchEvent{Type: "ADDED", Object: l.typed(it)}) != nil {
			return
		}
	}
	bookmark := fmt.Sprintf(`{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":%q,"annotations":{%q:"true"}}}`,
		strings.TrimSuffix(l.Kind, "List"), l.APIVersion, rv, initialEventsEnd)
	if enc.Encode(watchEvent{Type: "BOOKMARK", Object: json.RawMessage(bookmark)}) != nil {
		return
	}
	flush()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !x.rule.removed.Load() {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
	p.inject(x.rule.desc, x.info, "ended the stale watch-list, so the client watches on from resourceVersion %s", rv)
}
