package apiproxy

import (
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
)

// Info is what a request asks the API server, as the proxy reads its path.
type Info struct {
	Verb string
	// Resource is the plural resource ("pods", "databaseclusters");
	// Subresource what follows the name, if anything ("status", "scale").
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Path        string
}

// String reads like the request: "update databaseclusters/status db/x".
func (i Info) String() string {
	s := i.Verb + " " + i.Resource
	if i.Subresource != "" {
		s += "/" + i.Subresource
	}
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
	// Lock says the write carries a leader-election record: client-go's
	// ConfigMap and Endpoints locks keep it in an annotation that the
	// leader renews every few seconds, as a Lease's holder does.
	Lock bool
	// NoOp says the API server answered the update or patch with the
	// object at the resourceVersion the proxy last saw it at: the write
	// changed nothing (an operator that updates what it owns on every
	// pass, changed or not). Known only for answers the proxy reads.
	NoOp bool
}

// writeVerbs change objects; After rules count them and Writes sums them.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// namespaceSubresources tell /namespaces/<ns>/status, the namespace's
// status, from /namespaces/<ns>/pods, the pods in it.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

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
	switch {
	case len(parts) == 3 && parts[0] == "namespaces" && namespaceSubresources[parts[2]]:
		// A namespace's own subresource, not a collection in it.
	case len(parts) >= 3 && parts[0] == "namespaces":
		info.Namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		info.Resource = parts[0]
	}
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = strings.Join(parts[2:], "/")
	}
	info.Verb = verb(r, info.Name != "")
	if info.Verb == "list" || info.Verb == "watch" {
		// client-go watches and lists one object by a field selector on
		// its name: that is a request about the object so named.
		if sel, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector")); err == nil {
			info.Name, _ = sel.RequiresExactMatch("metadata.name")
		}
	}
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
