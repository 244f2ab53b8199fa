package apiproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// stream is an open watch through the proxy. A JSON stream is decoded
// event by event (read), passes through the event rules into a queue, and
// is written on to the client from it (write), flushed event by event. An
// opaque stream (protobuf) is copied untouched, and can only be closed.
type stream struct {
	p        *Proxy
	info     Info
	view     labelView
	ctx      context.Context // the client's
	opaque   bool
	upstream io.ReadCloser

	stop     chan struct{}
	stopOnce sync.Once
	expire   atomic.Bool

	mu   sync.Mutex
	q    queue
	done bool // the API server ended the stream
	wake chan struct{}
	out  *io.PipeWriter
}

// watch takes over the body of a watch the API server accepted.
func (p *Proxy) watch(x *exchange, resp *http.Response) {
	s := &stream{
		p: p, info: x.info, view: x.view, ctx: x.ctx, upstream: resp.Body,
		opaque: !x.json || !isJSON(resp.Header.Get("Content-Type")),
		stop:   make(chan struct{}), wake: make(chan struct{}, 1),
	}
	p.mu.Lock()
	p.streams[s] = struct{}{}
	if s.opaque {
		for _, a := range p.rules {
			if a.watchesStream(s.info) {
				p.injectLocked(a.desc, s.info, "not applied: client accepts only protobuf")
			}
		}
	}
	p.mu.Unlock()
	if s.opaque {
		resp.Body = &opaqueBody{s}
		return
	}
	pr, pw := io.Pipe()
	s.out, resp.Body = pw, pr
	go s.read()
	go s.write()
}

// read decodes the API server's events into the queue until it ends.
func (s *stream) read() {
	dec := json.NewDecoder(s.upstream)
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			break
		}
		s.arrive(ev)
	}
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	s.signal()
}

// arrive passes an event through the event rules: dropped, or queued,
// held or not. The stream's lock is held while the rule is chosen, so
// that a Remove either sees the event queued or the rule gone.
func (s *stream) arrive(ev watchEvent) {
	var o struct {
		Metadata objMeta `json:"metadata"`
	}
	_ = json.Unmarshal(ev.Object, &o)
	m := o.Metadata
	k := objKey{s.info.Resource, m.Namespace, m.Name}
	switch ev.Type {
	case "ADDED", "MODIFIED":
		s.p.labels.set(k, m.Labels)
	case "DELETED":
		s.p.labels.forget(k)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &held{ev: ev, meta: m, arrived: time.Now()}
	if a := s.p.eventRule(s.info, ev.Type, m); a != nil {
		switch {
		case a.Events == EventsDrop:
			s.p.inject(a.desc, s.info, "dropped %s", eventWhat(ev.Type, s.info, m))
			return
		case a.Events == EventsDelay && a.Delay > 0:
			h.rule, h.until = a, h.arrived.Add(a.Delay)
		default:
			h.rule = a
		}
	}
	s.q.push(h)
	s.signal()
}

// eventRule finds the rule that acts on an event of a stream, and counts
// the use (bookmarks are not counted: they are not what Count means).
func (p *Proxy) eventRule(info Info, typ string, m objMeta) *armed {
	if typ == "ERROR" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.rules {
		if !a.watchesStream(info) || !a.takesEvent(typ, m) {
			continue
		}
		if typ == "BOOKMARK" || p.takes(a) {
			return a
		}
	}
	return nil
}

// takesEvent says whether the rule acts on an event of a stream it
// watches. Bookmarks carry no object: drop lets them pass (the client's
// resourceVersion moves on), coalesce keeps them back to deliver the last,
// and delays hold them unless they are only about some objects.
func (a *armed) takesEvent(typ string, m objMeta) bool {
	if typ == "BOOKMARK" {
		switch a.Events {
		case EventsDrop:
			return false
		case EventsCoalesce:
			return true
		}
		return a.Name == "" && len(a.Labels) == 0 && a.Namespace == ""
	}
	return (a.Name == "" || a.Name == m.Name) &&
		(a.Namespace == "" || a.Namespace == m.Namespace) &&
		(len(a.Labels) == 0 || labelView{known: true, labels: m.Labels}.has(a.Labels))
}

// write delivers the queue's due events to the client until the stream
// ends: the API server ended it and nothing is held, the client left, or
// CloseWatches closed it.
func (s *stream) write() {
	defer s.end()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		s.mu.Lock()
		out, next, merged := s.q.due(time.Now())
		done := s.done && len(s.q.items) == 0
		s.mu.Unlock()
		s.coalesced(merged)
		for _, h := range out {
			s.delivered(h)
			if s.send(h.ev) != nil {
				return
			}
			if h.ev.Type == "ADDED" || h.ev.Type == "MODIFIED" {
				s.p.noteDelivered(objKey{s.info.Resource, h.meta.Namespace, h.meta.Name}, h.meta.ResourceVersion)
			}
		}
		if done {
			return
		}
		var tick <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			tick = timer.C
		}
		select {
		case <-s.wake:
		case <-tick:
		case <-s.ctx.Done():
			return
		case <-s.stop:
			if s.expire.Load() {
				s.sendExpired()
			}
			return
		}
		timer.Stop()
	}
}

// delivered records what holding an event did to it.
func (s *stream) delivered(h *held) {
	waited := round(time.Since(h.arrived))
	what := eventWhat(h.ev.Type, s.info, h.meta)
	switch {
	case h.rule != nil && h.rule.Events == EventsCoalesce:
		// Recorded when it was coalesced.
	case h.rule != nil && h.rule.Stale:
		s.p.inject(h.rule.desc, s.info, "delayed %s %s (stale cache)", waited, what)
	case h.rule != nil:
		s.p.inject(h.rule.desc, s.info, "delayed %s %s", waited, what)
	case h.behind:
		s.p.inject("", s.info, "delayed %s %s behind held events", waited, what)
	}
}

func (p *Proxy) noteDelivered(k objKey, rv string) {
	p.versions.saw(k, rv)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.delivered == nil {
		p.delivered = map[objKey]deliveredEvent{}
	}
	p.delivered[k] = deliveredEvent{resourceVersion: rv, at: time.Now()}
}

func (s *stream) send(ev watchEvent) error {
	typ, err := json.Marshal(ev.Type)
	if err != nil {
		return err
	}
	// Written by hand: the object goes on byte for byte as it came.
	b := make([]byte, 0, len(ev.Object)+len(typ)+24)
	b = append(append(append(b, `{"type":`...), typ...), `,"object":`...)
	b = append(append(b, ev.Object...), "}\n"...)
	_, err = s.out.Write(b)
	return err
}

// sendExpired tells the client its resourceVersion is too old, as the API
// server does, so that client-go's reflector lists again rather than
// watching on from where it was.
func (s *stream) sendExpired() {
	obj, err := json.Marshal(status(apierrors.NewResourceExpired("too old resource version: expired by gauntlet's API proxy")))
	if err == nil {
		_ = s.send(watchEvent{Type: "ERROR", Object: obj})
	}
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// end closes both sides: the client's stream ends cleanly (EOF), the API
// server's is cancelled.
func (s *stream) end() {
	_ = s.out.Close()
	_ = s.upstream.Close()
	s.p.forget(s)
}

// release wakes the stream's writer once rule a is removed: what a holds
// becomes due, its coalesced events collapsing as they reach the head.
func (s *stream) release(*armed) {
	if s.opaque {
		return
	}
	s.signal()
}

// coalesced records what collapsing a removed rule's events kept.
func (s *stream) coalesced(merged []coalesced) {
	for _, c := range merged {
		events := "events"
		if c.n == 1 {
			events = "event"
		}
		s.p.inject(c.last.rule.desc, s.info, "coalesced %d %s of %s into %s",
			c.n, events, objectWhat(s.info, c.last.meta), c.last.ev.Type)
	}
}

// close ends the stream, after an ERROR 410 event if expire.
func (s *stream) close(expire bool) {
	s.stopOnce.Do(func() {
		s.expire.Store(expire)
		close(s.stop)
		if s.opaque {
			// Nothing reads it but the copy to the client: closing it
			// ends that copy (as EOF, see opaqueBody).
			_ = s.upstream.Close()
		}
	})
}

func (s *stream) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// opaqueBody is a stream the proxy cannot read (protobuf), passed on as
// it is; closing it ends the client's stream cleanly.
type opaqueBody struct{ s *stream }

func (b *opaqueBody) Read(p []byte) (int, error) {
	n, err := b.s.upstream.Read(p)
	if err != nil && b.s.stopped() {
		err = io.EOF
	}
	return n, err
}

func (b *opaqueBody) Close() error {
	b.s.p.forget(b.s)
	return b.s.upstream.Close()
}

func (p *Proxy) forget(s *stream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.streams, s)
}

func (p *Proxy) openStreams() []*stream {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*stream, 0, len(p.streams))
	for s := range p.streams {
		out = append(out, s)
	}
	return out
}

// CloseWatches ends every open watch whose request matches match (its
// Verb aside) and says how many. With expire, each first gets an ERROR
// event with a 410 Expired Status, as the API server sends for a
// resourceVersion too old to watch from, so that client-go's reflector
// lists again instead of watching on. Events still held in them are lost,
// as they would be with the connection.
func (p *Proxy) CloseWatches(match Rule, expire bool) int {
	match.Verb = ""
	desc := "close watches of " + match.target("")
	if expire {
		desc = "expire watches of " + match.target("")
	}
	n := 0
	for _, s := range p.openStreams() {
		if s.stopped() || !match.matches(s.info, s.view) {
			continue
		}
		what := "closed the watch"
		switch {
		case expire && s.opaque:
			what += " (not expired: client accepts only protobuf)"
		case expire:
			what = "expired the watch (410 Expired)"
		}
		s.mu.Lock()
		if held := s.q.holding(); held > 0 {
			what += fmt.Sprintf(", losing %d held events", held)
		}
		s.mu.Unlock()
		s.close(expire)
		p.inject(desc, s.info, "%s", what)
		n++
	}
	return n
}

// Held is how many watch events rules hold now, over every open stream:
// a test or the engine waits for it to know events reached the proxy
// before it removes the rule that holds them.
func (p *Proxy) Held() int {
	n := 0
	for _, s := range p.openStreams() {
		s.mu.Lock()
		n += s.q.holding()
		s.mu.Unlock()
	}
	return n
}
