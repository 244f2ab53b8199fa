package apiproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"mime"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
)

// maxLabelObjects bounds the label cache: enough for the objects one
// operator works with, small enough not to matter in memory.
const maxLabelObjects = 8192

// maxReadBody is the largest request or response body the proxy reads
// whole to look into; larger ones stream through unread.
const maxReadBody = 8 << 20

// objKey names an object the proxy saw answered.
type objKey struct{ resource, namespace, name string }

// objMeta is the part of an object the proxy reads.
type objMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	Labels          map[string]string `json:"labels"`
	ResourceVersion string            `json:"resourceVersion"`
}

// objectJSON reads an object or a list of them.
type objectJSON struct {
	Kind     string  `json:"kind"`
	Metadata objMeta `json:"metadata"`
	Items    []struct {
		Metadata objMeta `json:"metadata"`
	} `json:"items"`
}

// labelCache remembers the labels of objects as the API server last
// answered them, so that a rule with Labels can match an update, patch or
// delete, whose path names the object but not its labels.
type labelCache struct {
	mu sync.Mutex
	m  map[objKey]map[string]string
}

func (c *labelCache) get(k objKey) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[k]
	return l, ok
}

func (c *labelCache) set(k objKey, l map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[objKey]map[string]string{}
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= maxLabelObjects {
		// Forget any one object: a miss only means a Labels rule does
		// not match a request about it until it is seen again.
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = l
}

func (c *labelCache) forget(k objKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// readAnswer reads a 2xx JSON answer as an object or a list of them; ok
// is false for what holds none (a Status, a body that is not one).
func readAnswer(body []byte) (o *objectJSON, ok bool) {
	o = &objectJSON{}
	if json.Unmarshal(body, o) != nil || o.Kind == "Status" {
		return nil, false
	}
	return o, true
}

// learn updates the cache from an answer (readAnswer) to the request info.
func (c *labelCache) learn(info Info, o *objectJSON) {
	if info.Verb == "delete" {
		c.forget(objKey{info.Resource, info.Namespace, info.Name})
		return
	}
	if o.Metadata.Name != "" {
		c.set(objKey{info.Resource, o.Metadata.Namespace, o.Metadata.Name}, o.Metadata.Labels)
	}
	for _, it := range o.Items {
		c.set(objKey{info.Resource, it.Metadata.Namespace, it.Metadata.Name}, it.Metadata.Labels)
	}
}

// labelView answers whether the object a request is about carries labels.
type labelView struct {
	known    bool
	labels   map[string]string
	selector labels.Selector // lists and watches: what they ask for
}

// has says whether every pair in want is on the object (or, for a list
// or watch, required by its selector); an unknown object has none.
func (v labelView) has(want map[string]string) bool {
	for k, val := range want {
		if v.selector != nil {
			if got, ok := v.selector.RequiresExactMatch(k); !ok || got != val {
				return false
			}
			continue
		}
		if got, ok := v.labels[k]; !v.known || !ok || got != val {
			return false
		}
	}
	return true
}

// viewLabels finds the labels of what the request is about. A create's
// body is read (and put back) when it is JSON; a named request uses the
// cache; a list or watch its labelSelector.
func (p *Proxy) viewLabels(r *http.Request, info Info) labelView {
	switch info.Verb {
	case "create":
		body, ok := peekJSONBody(r)
		if !ok {
			return labelView{}
		}
		var o objectJSON
		if json.Unmarshal(body, &o) != nil {
			return labelView{}
		}
		return labelView{known: true, labels: o.Metadata.Labels}
	case "list", "watch", "deletecollection":
		sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
		if err != nil {
			sel = labels.Nothing()
		}
		return labelView{known: true, selector: sel}
	}
	l, ok := p.labels.get(objKey{info.Resource, info.Namespace, info.Name})
	return labelView{known: ok, labels: maps.Clone(l)}
}

// peekJSONBody reads a JSON request body and puts it back for forwarding.
func peekJSONBody(r *http.Request) ([]byte, bool) {
	if r.Body == nil || !isJSON(r.Header.Get("Content-Type")) {
		return nil, false
	}
	body, err := peekBody(r)
	return body, err == nil && len(body) <= maxReadBody
}

// peekBody reads up to maxReadBody+1 bytes of a request's body and puts
// them back for forwarding.
func peekBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReadBody+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	return body, err
}

// isJSON says whether a Content-Type is JSON (parameters aside).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
