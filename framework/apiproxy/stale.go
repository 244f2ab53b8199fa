package apiproxy

import (
	"bytes"
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// What the proxy keeps of the reads it forwarded, for Stale rules: the
// last answers of each read, within a memory budget.
const (
	maxRecordsPerKey = 64
	maxRecordBytes   = 32 << 20
)

// staleIgnored are query parameters that do not change what a read is
// about, only how fresh or how long: a lagging cache answers regardless.
var staleIgnored = []string{"resourceVersion", "resourceVersionMatch", "timeoutSeconds", "allowWatchBookmarks", "timeout"}

// staleKey names a read: its path, its query but for staleIgnored, and
// the Accept asked of the API server (a Table is not a list).
func staleKey(x *exchange) string {
	q := url.Values{}
	for k, v := range x.query {
		if !slices.Contains(staleIgnored, k) {
			q[k] = v
		}
	}
	return x.info.Path + "?" + q.Encode() + " " + x.accept
}

// record is one 2xx JSON answer to a read.
type record struct {
	seq         uint64
	at          time.Time
	status      int
	contentType string
	body        []byte
}

// recorder keeps the last answers of each read, oldest first, and drops
// the oldest of all when over its byte budget.
type recorder struct {
	mu    sync.Mutex
	byKey map[string][]record
	// order is every kept record's key and seq, oldest first; entries of
	// records already dropped for their key's limit are skipped, and
	// compacted away once they outnumber the rest.
	order []recordRef
	live  int
	bytes int
	seq   uint64
}

type recordRef struct {
	key string
	seq uint64
}

func (rc *recorder) add(key string, rec record) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.byKey == nil {
		rc.byKey = map[string][]record{}
	}
	recs := rc.byKey[key]
	if n := len(recs); n > 0 && recs[n-1].status == rec.status && bytes.Equal(recs[n-1].body, rec.body) {
		// The same answer again: the older record already says it, and
		// has held since then.
		return
	}
	rc.seq++
	rec.seq = rc.seq
	rc.byKey[key] = append(recs, rec)
	rc.order = append(rc.order, recordRef{key, rec.seq})
	rc.live++
	rc.bytes += len(rec.body)
	if len(rc.byKey[key]) > maxRecordsPerKey {
		rc.dropOldest(key)
	}
	for rc.bytes > maxRecordBytes && len(rc.order) > 0 {
		ref := rc.order[0]
		rc.order = rc.order[1:]
		if recs := rc.byKey[ref.key]; len(recs) > 0 && recs[0].seq == ref.seq {
			rc.dropOldest(ref.key)
		}
	}
	if len(rc.order) > 2*rc.live+1024 {
		rc.order = slices.DeleteFunc(rc.order, func(ref recordRef) bool {
			recs := rc.byKey[ref.key]
			_, found := slices.BinarySearchFunc(recs, ref.seq, func(r record, seq uint64) int { return cmp.Compare(r.seq, seq) })
			return !found
		})
	}
}

func (rc *recorder) dropOldest(key string) {
	recs := rc.byKey[key]
	rc.bytes -= len(recs[0].body)
	rc.live--
	if len(recs) == 1 {
		delete(rc.byKey, key)
		return
	}
	rc.byKey[key] = slices.Delete(recs, 0, 1)
}

// before is the newest record of key made at or before t.
func (rc *recorder) before(key string, t time.Time) (record, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	recs := rc.byKey[key]
	for i := len(recs) - 1; i >= 0; i-- {
		if !recs[i].at.After(t) {
			return recs[i], true
		}
	}
	return record{}, false
}

// serveStale answers a read as the API server answered it when the rule's
// lag began, if the proxy recorded that; otherwise it forwards.
func (p *Proxy) serveStale(w http.ResponseWriter, r *http.Request, x *exchange) {
	rule := x.rule
	if rule.AtResourceVersion != "" {
		p.serveAt(w, r, x, rule.AtResourceVersion)
		return
	}
	if !x.json {
		p.inject(rule.desc, x.info, "not applied: client accepts only protobuf")
		p.forward(w, r, x)
		return
	}
	rec, ok := p.records.before(staleKey(x), rule.at.Add(-rule.Lag))
	if !ok {
		p.forward(w, r, x)
		return
	}
	x.injected = rule.desc
	p.inject(rule.desc, x.info, "served the %s recorded at %s", x.info.Verb, rec.at.Format("15:04:05.000"))
	w.Header().Set("Content-Type", rec.contentType)
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body)
}
