package apiproxy

import (
	"fmt"
	"strings"
	"time"
)

// Injection is one thing the proxy did to what an operator sees: an error
// answered, a request held, an event delayed or dropped, a stale answer, a
// watch closed, an after-write callback fired. The engine prints them in a
// run's timeline.
type Injection struct {
	At time.Time
	// Rule is the String() of the rule that acted, or for CloseWatches
	// what was asked ("expire watches of configmaps db/*").
	Rule    string
	Request Info
	What    string
}

func (i Injection) String() string {
	s := i.At.Format("15:04:05.000") + " " + i.Request.String() + ": " + i.What
	if i.Rule != "" {
		s += " (" + i.Rule + ")"
	}
	return s
}

// Injected is every action the proxy took, oldest first.
func (p *Proxy) Injected() []Injection {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Injection(nil), p.injected...)
}

// inject records an action taken for the rule described.
func (p *Proxy) inject(rule string, info Info, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.injectLocked(rule, info, format, args...)
}

func (p *Proxy) injectLocked(rule string, info Info, format string, args ...any) {
	p.injected = append(p.injected, Injection{At: time.Now(), Rule: rule, Request: info, What: fmt.Sprintf(format, args...)})
}

// eventWhat describes an event for an Injection: "MODIFIED pods db/db-0".
func eventWhat(typ string, info Info, m objMeta) string {
	return typ + " " + objectWhat(info, m)
}

// objectWhat names an event's object: "pods db/db-0".
func objectWhat(info Info, m objMeta) string {
	s := info.Resource
	if m.Namespace != "" || m.Name != "" {
		s += " " + strings.TrimPrefix(m.Namespace+"/"+m.Name, "/")
	}
	return s
}

// round keeps durations in the timeline readable.
func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
