package scenario

import (
	"net/http"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// StaleFromCreated serves a stale view as of the resource's creation.
const StaleFromCreated = "created"

// StaleFromDeleted serves a stale view as of the old resource's deletion,
// seen by a before step's recreate.
const StaleFromDeleted = "deleted"

// Verbs are the API verbs a request match may name.
var Verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// WriteVerbs are the verbs that change what the API server stores.
var WriteVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// APIErrorStatuses are the statuses an api-error may answer with.
var APIErrorStatuses = []int{http.StatusConflict, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// viewVerbs are the verbs each view fault can act on ("" in the match
// means all of them); a match naming another is a fault the proxy could
// never apply.
var viewVerbs = map[string][]string{
	ActionKillAfterWrite: WriteVerbs,
	ActionStaleView:      {"get", "list", "watch"},
	ActionWatchDelay:     {"watch"},
	ActionWatchDrop:      {"watch"},
	ActionWatchCoalesce:  {"watch"},
	ActionWatchClose:     {"watch"},
}

// viewFault checks a view fault's fields, and that no view-only field is
// set on a Chaos Mesh fault.
func (c *checker) viewFault(sp *ScenarioSpec) {
	f := sp.Fault
	p := "spec.fault"
	view := IsViewAction(f.Action)
	only := func(field string, set bool, actions ...string) {
		if set && !slices.Contains(actions, f.Action) {
			c.at(p+"."+field, "applies to %s only, not %s", strings.Join(actions, ", "), f.Action)
		}
	}
	only("requests", f.Requests != nil, ViewActions...)
	only("status", f.Status != 0, ActionAPIError)
	only("retryAfter", f.RetryAfter.Duration != 0, ActionAPIError)
	only("after", f.After != 0, ActionKillAfterWrite)
	only("lag", f.Lag.Duration != 0, ActionStaleView)
	only("expire", f.Expire, ActionWatchClose)
	only("staleFrom", f.StaleFrom != "", ActionStaleView)
	only("restart", f.Restart, ActionStaleView, ActionWatchDelay, ActionWatchDrop, ActionWatchCoalesce)
	if f.StaleFrom != "" && f.StaleFrom != StaleFromCreated && f.StaleFrom != StaleFromDeleted {
		c.at(p+".staleFrom", "%q: want %q or %q (or leave it out and set lag)", f.StaleFrom, StaleFromCreated, StaleFromDeleted)
	}
	if f.StaleFrom != "" && f.Lag.Duration != 0 {
		c.at(p+".lag", "set lag or staleFrom, not both")
	}
	if !view {
		return
	}
	if role, ok := sp.Roles[f.Target]; ok && !role.Operator {
		c.at(p+".target", "%q: a view fault changes what the operator sees, so its target is a role with operator: true", f.Target)
	}
	switch f.Action {
	case ActionAPIError:
		if !slices.Contains(APIErrorStatuses, f.Status) {
			c.at(p+".status", "%d: want one of %v", f.Status, APIErrorStatuses)
		}
		if f.RetryAfter.Duration != 0 && f.Status != http.StatusTooManyRequests && f.Status != http.StatusServiceUnavailable {
			c.at(p+".retryAfter", "goes with a 429 or 503 only, not %d", f.Status)
		}
	case ActionKillAfterWrite:
		if f.After < 1 {
			c.at(p+".after", "required for %s: the count of matching writes (1 or more) after which the operator is killed", f.Action)
		}
	}
	if f.Lag.Duration < 0 {
		c.at(p+".lag", "%s: want a duration of 0 or more", f.Lag.Duration)
	}
	if f.Requests != nil {
		c.requestMatch(p+".requests", f.Action, *f.Requests)
	}
}

func (c *checker) requestMatch(p, action string, m RequestMatch) {
	if m.Verb != "" {
		allowed := Verbs
		if v, ok := viewVerbs[action]; ok {
			allowed = v
		}
		if !slices.Contains(allowed, m.Verb) {
			c.at(p+".verb", "%q: %s acts on %s requests only", m.Verb, action, strings.Join(allowed, ", "))
		}
	}
	if strings.Contains(m.Resource, "/") {
		c.at(p+".resource", "%q: name the plural resource alone and the subresource in subresource", m.Resource)
	}
	if m.Resource != "" && strings.ToLower(m.Resource) != m.Resource {
		c.at(p+".resource", "%q: a resource is its lower-case plural, such as statefulsets", m.Resource)
	}
	if m.Namespace != "" && m.Namespace != "*" {
		for _, msg := range validation.IsDNS1123Label(m.Namespace) {
			c.at(p+".namespace", "%q is not a namespace name (or *): %s", m.Namespace, msg)
		}
	}
	for k, v := range m.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			c.at(p+".labels", "%q is not a label key: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			c.at(p+".labels."+k, "%q is not a label value: %s", v, msg)
		}
	}
	if m.Count < 0 {
		c.at(p+".count", "%d: want 0 (every match) or more", m.Count)
	}
	if m.Probability < 0 || m.Probability > 1 {
		c.at(p+".probability", "%v: want a chance from 0 to 1", m.Probability)
	}
	if action == ActionKillAfterWrite && m.Count != 0 {
		c.at(p+".count", "kill-after-write acts once, after its after-th write: count does not apply")
	}
	if action == ActionWatchClose && (m.Count != 0 || m.Probability != 0) {
		c.at(p, "watch-close ends the open streams once, at the injection: count and probability do not apply")
	}
}
