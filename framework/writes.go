package framework

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Write is one write call a client made.
type Write struct {
	// Verb is create, update, patch, apply, delete or deleteAllOf, with a
	// "/status" (or other subresource) suffix for subresource writes.
	Verb string
	// Kind of the object written.
	Kind string
	// Key of the object written.
	Key client.ObjectKey
}

func (w Write) String() string { return fmt.Sprintf("%s %s %s", w.Verb, w.Kind, w.Key) }

// WriteLog records the writes made through the clients it wraps.
type WriteLog struct {
	mu     sync.Mutex
	writes []Write
}

// Wrap returns a client that records every write into the log and forwards
// every call to c.
func (l *WriteLog) Wrap(c client.Client) client.Client {
	return &recordingClient{Client: c, log: l}
}

// Len is the number of writes recorded so far; pass it to Since.
func (l *WriteLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writes)
}

// Since returns the writes recorded after the mark returned by Len.
func (l *WriteLog) Since(mark int) []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Write(nil), l.writes[mark:]...)
}

// All returns every recorded write.
func (l *WriteLog) All() []Write { return l.Since(0) }

func (l *WriteLog) add(verb string, scheme *runtime.Scheme, obj runtime.Object, key client.ObjectKey) {
	kind := "?"
	if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil {
		kind = gvk.Kind
	}
	l.append(Write{Verb: verb, Kind: kind, Key: key})
}

func (l *WriteLog) append(w Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

// FormatWrites renders writes one per line.
func FormatWrites(ws []Write) string {
	lines := make([]string, len(ws))
	for i, w := range ws {
		lines[i] = "  " + w.String()
	}
	return strings.Join(lines, "\n")
}

type recordingClient struct {
	client.Client
	log *WriteLog
}

func (c *recordingClient) record(verb string, obj client.Object) {
	c.log.add(verb, c.Scheme(), obj, client.ObjectKeyFromObject(obj))
}

func (c *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.record("create", obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.record("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.record("patch", obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *recordingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	kind, key := applyTarget(obj)
	c.log.append(Write{Verb: "apply", Kind: kind, Key: key})
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.record("delete", obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *recordingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.record("deleteAllOf", obj)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *recordingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *recordingClient) SubResource(sub string) client.SubResourceClient {
	return &recordingSubResource{SubResourceClient: c.Client.SubResource(sub), parent: c, sub: sub}
}

type recordingSubResource struct {
	client.SubResourceClient
	parent *recordingClient
	sub    string
}

func (s *recordingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	s.parent.record("create/"+s.sub, obj)
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *recordingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.parent.record("update/"+s.sub, obj)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *recordingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.parent.record("patch/"+s.sub, obj)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *recordingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	kind, key := applyTarget(obj)
	s.parent.log.append(Write{Verb: "apply/" + s.sub, Kind: kind, Key: key})
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}

// applyTarget reads kind, namespace and name from an apply configuration,
// which every generated configuration exposes through these getters.
func applyTarget(obj runtime.ApplyConfiguration) (string, client.ObjectKey) {
	type named interface {
		GetKind() *string
		GetName() *string
		GetNamespace() *string
	}
	n, ok := obj.(named)
	if !ok {
		return "?", client.ObjectKey{}
	}
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	return deref(n.GetKind()), client.ObjectKey{Namespace: deref(n.GetNamespace()), Name: deref(n.GetName())}
}
