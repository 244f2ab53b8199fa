package apiproxy

import (
	"encoding/json"
	"time"
)

// watchEvent is one event of a watch stream, as the API server sends it.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// held is an event in a stream's queue.
type held struct {
	ev      watchEvent
	meta    objMeta
	arrived time.Time
	// rule holds the event: until `until` when set (a timed delay), else
	// until the rule is removed. nil: the event only waits its turn.
	rule  *armed
	until time.Time
	// behind says the event arrived while others were held, so it waited
	// for them though no rule held it.
	behind bool
	// collapsed says a coalesce rule's release already kept this event as
	// the newest of its object.
	collapsed bool
}

// queue is a watch stream's events not yet delivered, in arrival order.
// Only its head may leave, so no event overtakes one held before it: a
// client sees a stream's events in the order the API server sent them,
// some later, which is what a slow cache or network does. (A dropped
// event never enters it.)
type queue struct {
	items []*held
}

func (q *queue) push(h *held) {
	for _, o := range q.items {
		if o.rule != nil && !o.rule.removed.Load() {
			h.behind = true
			break
		}
	}
	q.items = append(q.items, h)
}

// due takes from the head every event that may go at now; next is when
// the head may go if a timed delay holds it (zero: when a rule is removed).
// A removed coalesce rule's events collapse when the first of them reaches
// the head, under the same lock as the taking, so none can leave before
// its object's newer events are merged into it; merged is what collapsed.
func (q *queue) due(now time.Time) (out []*held, next time.Time, merged []coalesced) {
	for len(q.items) > 0 {
		h := q.items[0]
		if h.rule != nil && h.rule.Events == EventsCoalesce && h.rule.removed.Load() && !h.collapsed {
			merged = append(merged, q.collapse(h.rule)...)
			continue
		}
		if h.rule != nil && !h.rule.removed.Load() {
			if h.until.IsZero() {
				break
			}
			if now.Before(h.until) {
				next = h.until
				break
			}
		}
		out = append(out, h)
		q.items[0] = nil
		q.items = q.items[1:]
	}
	return out, next, merged
}

// coalesced is what collapse kept of an object's events: the newest, and
// how many it stands for.
type coalesced struct {
	last *held
	n    int
}

// collapse keeps, of the events rule a holds, only the newest of each
// object, where it stands, and the last bookmark, where it stands: each
// object ends as the API server has it, as a watcher that fell behind
// and caught up would see it, and the client's resourceVersion ends no
// earlier than it would have. Events a does not hold stay as they are.
func (q *queue) collapse(a *armed) []coalesced {
	type key struct{ ns, name string }
	last := map[key]int{}
	count := map[key]int{}
	lastBookmark := -1
	for i, h := range q.items {
		switch {
		case h.rule != a:
		case h.ev.Type == "BOOKMARK":
			lastBookmark = i
		default:
			k := key{h.meta.Namespace, h.meta.Name}
			last[k] = i
			count[k]++
		}
	}
	var kept []*held
	var merged []coalesced
	for i, h := range q.items {
		if h.rule == a {
			h.collapsed = true
			k := key{h.meta.Namespace, h.meta.Name}
			switch {
			case h.ev.Type == "BOOKMARK" && i != lastBookmark:
				continue
			case h.ev.Type != "BOOKMARK" && last[k] != i:
				continue
			case h.ev.Type != "BOOKMARK":
				merged = append(merged, coalesced{h, count[k]})
			}
		}
		kept = append(kept, h)
	}
	q.items = kept
	return merged
}

// holding counts the object events an armed rule holds (bookmarks,
// which carry no object, aside).
func (q *queue) holding() int {
	n := 0
	for _, h := range q.items {
		if h.rule != nil && !h.rule.removed.Load() && h.ev.Type != "BOOKMARK" {
			n++
		}
	}
	return n
}
