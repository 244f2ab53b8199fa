package apiproxy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What an Events rule does to the watch events it matches.
const (
	// EventsDelay holds each event until Delay has passed since it arrived
	// (Delay 0: until the rule is removed), then delivers it in order.
	EventsDelay = "delay"
	// EventsDrop discards each event; bookmarks still pass, so the
	// client's resourceVersion moves past what it never saw.
	EventsDrop = "drop"
	// EventsCoalesce holds events and, when the rule is removed, delivers
	// only the newest of each object, as a slow watcher would see them.
	EventsCoalesce = "coalesce"
)

// defaultTimeoutAfter is how long a Timeout rule holds a request whose
// client never gives up: the API server's own default request timeout.
const defaultTimeoutAfter = 60 * time.Second

// Rule perturbs the requests it matches. Empty match fields match
// anything, except Subresource. A rule has one action: an API error
// (Status), a reset connection (Reset), a request held to time out
// (Timeout), a callback after writes (After), something done to watch
// events (Events), a lagging cache (Stale), or, alone, a Delay.
type Rule struct {
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection.
	Verb string
	// Resource is the plural resource, without subresource ("pods").
	Resource string
	// Subresource is what follows the name ("status", "scale"). Empty
	// matches only requests without a subresource, so a rule on pods does
	// not also hit pods/log; "*" matches any subresource or none.
	Subresource string
	Namespace   string
	Name        string
	// Labels match requests about objects that carry all of them: a
	// create's body, a named object as the proxy last saw it answered, a
	// list or watch whose labelSelector requires each pair, and, for
	// Events, each event's object.
	Labels map[string]string
	// Count is how many matching requests (or events) the rule acts on
	// (0: all); Probability, when set, is the chance it acts on each
	// (seeded).
	Count       int
	Probability float64

	// Status is the HTTP status to answer with: 409, 429, 500, 503 or 504
	// (another code answers as an internal error with that code).
	Status int
	// RetryAfter goes with a 429 or 503 as the Retry-After header.
	RetryAfter time.Duration
	// Delay slows a request down before its action (alone: before it is
	// forwarded); with Events delay, it is how long each event is held.
	Delay time.Duration
	Reset bool

	// Timeout holds the request, never forwarded, until the client gives
	// up or TimeoutAfter (default 60 s) passes, then answers 504.
	Timeout      bool
	TimeoutAfter time.Duration

	// After makes an after-write rule: matching writes are forwarded
	// untouched and, when the After-th of them is answered with a 2xx,
	// Then runs once in a goroutine of its own and the rule is spent.
	After int
	Then  func(Request)

	// Events acts on the events of matching watch requests whose objects
	// match Name and Labels: EventsDelay, EventsDrop or EventsCoalesce.
	Events string

	// Stale answers matching get and list requests as a cache lagging Lag
	// behind the moment the rule was added would: with the newest response
	// the proxy recorded by then for the same path and query (forwarding
	// when there is none). Matching watches get no events while it is
	// armed; they arrive, in order, once it is removed.
	Stale bool
	Lag   time.Duration
	// AtResourceVersion, with Stale, serves reads exactly as of this
	// resourceVersion instead of as recorded: lists at that version, gets
	// as the object was then, and a watch-list's initial events as its
	// items were then (the API server keeps old versions until it
	// compacts, five minutes by default).
	AtResourceVersion string
}

// actions names the actions r asks for.
func (r Rule) actions() []string {
	var acts []string
	for name, set := range map[string]bool{
		"Status": r.Status != 0, "Reset": r.Reset, "Timeout": r.Timeout,
		"After": r.After != 0 || r.Then != nil, "Events": r.Events != "", "Stale": r.Stale,
	} {
		if set {
			acts = append(acts, name)
		}
	}
	slices.Sort(acts)
	return acts
}

// validate refuses a rule whose meaning would be a guess.
func (r Rule) validate() error {
	acts := r.actions()
	var errs []error
	switch {
	case len(acts) > 1:
		errs = append(errs, fmt.Errorf("it has %d actions (%s); a rule has one", len(acts), strings.Join(acts, ", ")))
	case len(acts) == 0 && r.Delay <= 0:
		errs = append(errs, errors.New("it has no action"))
	case r.Delay != 0 && len(acts) == 1 && r.Status == 0 && !r.Reset && r.Events != EventsDelay:
		errs = append(errs, fmt.Errorf("a Delay goes only with Status, Reset or Events %q, not %s", EventsDelay, acts[0]))
	}
	if r.Delay < 0 || r.Lag < 0 || r.TimeoutAfter < 0 || r.RetryAfter < 0 || r.Count < 0 || r.After < 0 {
		errs = append(errs, errors.New("a negative Delay, Lag, TimeoutAfter, RetryAfter, Count or After"))
	}
	if r.Probability < 0 || r.Probability > 1 {
		errs = append(errs, fmt.Errorf("a Probability of %v is outside [0, 1]", r.Probability))
	}
	if r.Events != "" && r.Events != EventsDelay && r.Events != EventsDrop && r.Events != EventsCoalesce {
		errs = append(errs, fmt.Errorf("an Events of %q is none of %q, %q, %q", r.Events, EventsDelay, EventsDrop, EventsCoalesce))
	}
	if r.Events != "" && r.Verb != "" && r.Verb != "watch" {
		errs = append(errs, fmt.Errorf("an Events rule acts on watches, not %s", r.Verb))
	}
	if r.Then != nil && r.After == 0 {
		errs = append(errs, errors.New("a Then without After"))
	}
	if r.After != 0 && r.Verb != "" && !writeVerbs[r.Verb] {
		errs = append(errs, fmt.Errorf("an After rule counts writes, and %s is not one", r.Verb))
	}
	if r.After != 0 && (r.Count != 0 || r.Probability != 0) {
		errs = append(errs, errors.New("an After rule fires once: Count and Probability do not apply"))
	}
	if r.Stale && r.Verb != "" && r.Verb != "get" && r.Verb != "list" && r.Verb != "watch" {
		errs = append(errs, fmt.Errorf("a Stale rule serves reads, and %s is not one", r.Verb))
	}
	if r.AtResourceVersion != "" && (!r.Stale || r.Lag != 0) {
		errs = append(errs, errors.New("an AtResourceVersion goes with Stale and no Lag"))
	}
	if r.Lag != 0 && !r.Stale {
		errs = append(errs, errors.New("a Lag without Stale"))
	}
	if r.TimeoutAfter != 0 && !r.Timeout {
		errs = append(errs, errors.New("a TimeoutAfter without Timeout"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("apiproxy: rule %q: %w", r.String(), err)
	}
	return nil
}

// matches says whether the rule's match fields take in the request;
// labels answers for the object it is about.
func (r *Rule) matches(i Info, labels labelView) bool {
	return (r.Verb == "" || r.Verb == i.Verb) && r.matchesTarget(i) &&
		(r.Name == "" || r.Name == i.Name) &&
		(len(r.Labels) == 0 || labels.has(r.Labels))
}

// matchesTarget is the part of the match a watch stream has before its
// events name objects: resource, subresource and namespace. A list or
// watch across all namespaces (as a controller's cache makes) matches a
// rule's namespace: what it returns includes that namespace's objects,
// and its watch events are matched object by object.
func (r *Rule) matchesTarget(i Info) bool {
	allNamespaces := i.Namespace == "" && (i.Verb == "list" || i.Verb == "watch")
	return (r.Resource == "" || r.Resource == i.Resource) &&
		(r.Subresource == "*" || r.Subresource == i.Subresource) &&
		(r.Namespace == "" || r.Namespace == i.Namespace || allNamespaces)
}

// String describes the action and what it is taken on, compactly:
// "409 on create configmaps db/*", "drop events of watch pods db/*".
func (r Rule) String() string {
	switch {
	case r.Events != "":
		act := r.Events
		if r.Events == EventsDelay && r.Delay > 0 {
			act += " " + r.Delay.String()
		}
		return act + " events of " + r.target("watch")
	case r.Stale && r.AtResourceVersion != "":
		return fmt.Sprintf("stale (as of resourceVersion %s) %s", r.AtResourceVersion, r.target("list,get,watch"))
	case r.Stale:
		return fmt.Sprintf("stale (lag %s) %s", r.Lag, r.target("list,get,watch"))
	case r.After != 0:
		s := fmt.Sprintf("after %d writes of %s", r.After, r.target(""))
		if r.After == 1 {
			s = "after 1 write of " + r.target("")
		}
		if r.Then != nil {
			s += ": then"
		}
		return s
	}
	var act []string
	if r.Delay > 0 {
		act = append(act, "delay "+r.Delay.String())
	}
	switch {
	case r.Reset:
		act = append(act, "reset")
	case r.Status != 0:
		act = append(act, strconv.Itoa(r.Status))
	case r.Timeout:
		act = append(act, "timeout "+r.timeoutAfter().String())
	}
	return strings.Join(act, ", ") + " on " + r.target("any")
}

// target describes the match fields; anyVerb stands in for an empty Verb.
func (r Rule) target(anyVerb string) string {
	parts := []string{cmp.Or(r.Verb, anyVerb)}
	res := cmp.Or(r.Resource, "resources")
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	parts = append(parts, res)
	if r.Namespace != "" || r.Name != "" {
		parts = append(parts, cmp.Or(r.Namespace, "*")+"/"+cmp.Or(r.Name, "*"))
	}
	if len(r.Labels) > 0 {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
			ls = append(ls, k+"="+r.Labels[k])
		}
		parts = append(parts, "labelled "+strings.Join(ls, ","))
	}
	switch {
	case r.Count == 1:
		parts = append(parts, "(once)")
	case r.Count > 1:
		parts = append(parts, fmt.Sprintf("(%d times)", r.Count))
	}
	if r.Probability > 0 {
		parts = append(parts, fmt.Sprintf("(p=%v)", r.Probability))
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " ")
}

func (r Rule) timeoutAfter() time.Duration {
	if r.TimeoutAfter > 0 {
		return r.TimeoutAfter
	}
	return defaultTimeoutAfter
}

// requestLevel says whether the rule acts on a request as it arrives
// (rather than on its events or after its answer).
func (r *Rule) requestLevel(verb string) bool {
	switch {
	case r.After != 0 || r.Events != "":
		return false
	case r.Stale:
		return verb == "get" || verb == "list" || (verb == "watch" && r.AtResourceVersion != "")
	}
	return true
}

// ordinal writes 1st, 2nd, 3rd, 4th, 11th, 21st.
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
