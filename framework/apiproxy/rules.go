package apiproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Rule perturbs the requests it matches. Empty match fields match
// anything. It answers with an API error (Status), or resets the
// connection (Reset), after waiting Delay; a rule with only a Delay slows
// the request down and then forwards it.
type Rule struct {
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection.
	Verb string
	// Resource is the plural resource, with its subresource after a slash
	// ("pods", "databaseclusters/status").
	Resource  string
	Namespace string
	Name      string
	// Count is how many matching requests the rule acts on (0: all);
	// Probability, when set, is the chance it acts on each (seeded).
	Count       int
	Probability float64

	// Status is the HTTP status to answer with: 409, 429, 500, 503 or 504
	// (another code answers as an internal error with that code).
	Status int
	// RetryAfter goes with a 429 or 503 as the Retry-After header.
	RetryAfter time.Duration
	Delay      time.Duration
	Reset      bool

	used int
}

func (r *Rule) matches(i Info) bool {
	return (r.Verb == "" || r.Verb == i.Verb) &&
		(r.Resource == "" || r.Resource == i.Resource) &&
		(r.Namespace == "" || r.Namespace == i.Namespace) &&
		(r.Name == "" || r.Name == i.Name)
}

func (r *Rule) String() string {
	var act []string
	if r.Delay > 0 {
		act = append(act, "delay "+r.Delay.String())
	}
	switch {
	case r.Reset:
		act = append(act, "reset")
	case r.Status != 0:
		act = append(act, strconv.Itoa(r.Status))
	}
	return strings.Join(act, ", ")
}

// Info is what a request asks the API server, as the proxy reads its path.
type Info struct {
	Verb, Resource, Namespace, Name string
	Path                            string
}

func (i Info) String() string {
	s := i.Verb + " " + i.Resource
	if i.Namespace != "" {
		s += " " + i.Namespace + "/"
	} else if i.Name != "" {
		s += " "
	}
	return s + i.Name
}

// Request is one request the proxy saw.
type Request struct {
	At   time.Time
	Info Info
	// Status is the HTTP status answered (0: the connection was reset).
	Status int
	// Injected says what a rule did to the request ("" for none).
	Injected string
	Took     time.Duration
}

// parseRequest reads /api/v1/... and /apis/<group>/<version>/... paths:
// [namespaces/<ns>/]<resource>[/<name>[/<subresource>]].
func parseRequest(r *http.Request) Info {
	info := Info{Path: r.URL.Path}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		info.Verb = strings.ToLower(r.Method)
		return info
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		info.Namespace, parts = parts[1], parts[2:]
	} else if len(parts) == 2 && parts[0] == "namespaces" {
		info.Resource, info.Name = "namespaces", parts[1]
		parts = nil
	}
	if len(parts) > 0 {
		info.Resource = parts[0]
	}
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Resource += "/" + parts[2]
	}
	info.Verb = verb(r, info.Name != "")
	return info
}

func verb(r *http.Request, named bool) string {
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(r.Method)
}

// writeStatus answers with the API error a rule asks for, shaped as the
// API server shapes it, so that clients react as they would to the real
// thing (client-go retries a 429 after its Retry-After, for one).
func writeStatus(w http.ResponseWriter, r *Rule, info Info) {
	gr := schema.GroupResource{Resource: info.Resource}
	msg := fmt.Errorf("injected by gauntlet's API proxy")
	seconds := int(r.RetryAfter / time.Second)
	var err *apierrors.StatusError
	switch r.Status {
	case http.StatusConflict:
		err = apierrors.NewConflict(gr, info.Name, msg)
	case http.StatusTooManyRequests:
		err = apierrors.NewTooManyRequests(msg.Error(), seconds)
	case http.StatusServiceUnavailable:
		err = apierrors.NewServiceUnavailable(msg.Error())
	case http.StatusGatewayTimeout:
		err = apierrors.NewTimeoutError(msg.Error(), seconds)
	default:
		err = apierrors.NewInternalError(msg)
		err.ErrStatus.Code = int32(r.Status)
	}
	if r.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(seconds, 1)))
	}
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}
