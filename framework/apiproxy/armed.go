package apiproxy

import (
	"maps"
	"slices"
	"sync/atomic"
	"time"
)

// RuleID names an armed rule, to remove it.
type RuleID uint64

// armed is a rule as the proxy holds it: with what it has done so far.
type armed struct {
	Rule
	id   RuleID
	desc string    // Rule.String(), computed once
	at   time.Time // when it was added: Stale lags behind this
	used int       // requests or events acted on, against Count
	// writes counts matching 2xx writes, against After.
	writes int
	// removed is read by watch streams without the proxy's lock, to let
	// held events go.
	removed atomic.Bool
}

// Add arms a rule. Rules are tried in the order they were added and the
// first that matches a request acts on it (After rules only watch, so
// they count whatever else acts). It refuses a rule whose meaning would be
// a guess: two actions, an unknown Events, a Probability outside [0, 1], a
// Then without After, After on a verb that does not write.
func (p *Proxy) Add(r Rule) (RuleID, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	r.Labels = maps.Clone(r.Labels)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	a := &armed{Rule: r, id: RuleID(p.nextID), desc: r.String(), at: time.Now()}
	p.rules = append(p.rules, a)
	if len(r.Labels) > 0 {
		p.labelRules.Add(1)
	}
	for s := range p.streams {
		if s.opaque && a.watchesStream(s.info) {
			p.injectLocked(a.desc, s.info, "not applied: client accepts only protobuf")
		}
	}
	return a.id, nil
}

// Remove disarms a rule and lets go of what it holds: events it delayed
// are delivered, those it coalesced as one per object, watches it stalled
// resume. Removing a rule twice, or a spent one, does nothing.
func (p *Proxy) Remove(id RuleID) {
	p.mu.Lock()
	var gone []*armed
	p.rules = slices.DeleteFunc(p.rules, func(a *armed) bool {
		if a.id == id {
			gone = append(gone, a)
			return true
		}
		return false
	})
	p.mu.Unlock()
	p.disarm(gone)
}

// Clear disarms every rule, as Remove does.
func (p *Proxy) Clear() {
	p.mu.Lock()
	gone := p.rules
	p.rules = nil
	p.mu.Unlock()
	p.disarm(gone)
}

func (p *Proxy) disarm(gone []*armed) {
	if len(gone) == 0 {
		return
	}
	for _, a := range gone {
		a.removed.Store(true)
		if len(a.Labels) > 0 {
			p.labelRules.Add(-1)
		}
	}
	for _, s := range p.openStreams() {
		for _, a := range gone {
			s.release(a)
		}
	}
}

// matchRequest finds the rule that acts on a request as it arrives, and
// the After rules that count it, and counts the use.
func (p *Proxy) matchRequest(info Info, view labelView) (act *armed, after []*armed) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.rules {
		if !a.matches(info, view) {
			continue
		}
		if a.After != 0 {
			after = append(after, a)
			continue
		}
		if act == nil && a.requestLevel(info.Verb) && p.takes(a) {
			act = a
		}
	}
	return act, after
}

// takes decides, with Count and Probability, whether a matching rule acts
// this time, and counts it if so. The caller holds p.mu (the rng is not
// safe for concurrent use, and must be drawn in a replayable order).
func (p *Proxy) takes(a *armed) bool {
	if a.Count > 0 && a.used >= a.Count {
		return false
	}
	if a.Probability > 0 && p.rng.Float64() >= a.Probability {
		return false
	}
	a.used++
	return true
}

// countWrite counts a 2xx write against the After rules that matched it
// and fires those it completes.
func (p *Proxy) countWrite(after []*armed, req Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range after {
		if a.removed.Load() {
			continue
		}
		a.writes++
		if a.writes < a.After {
			continue
		}
		a.removed.Store(true)
		p.rules = slices.DeleteFunc(p.rules, func(b *armed) bool { return b == a })
		if len(a.Labels) > 0 {
			p.labelRules.Add(-1)
		}
		what := "after " + ordinal(a.After) + " write"
		if a.Then != nil {
			what += ": then"
			go a.Then(req)
		}
		p.injectLocked(a.desc, req.Info, "%s", what)
	}
}

// watchesStream says whether an Events or Stale rule takes in a watch
// stream, before looking at its events' objects.
func (a *armed) watchesStream(i Info) bool {
	return (a.Events != "" || a.Stale) && (a.Verb == "" || a.Verb == "watch") && a.matchesTarget(i)
}
