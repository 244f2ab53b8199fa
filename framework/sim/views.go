package sim

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// switchClient lets one reconciler instance see each pass's faulty client.
type switchClient struct{ client.Client }

// remember keeps the view of the world before each action, for stale reads.
func (r *runner) remember(ctx context.Context) error {
	v, err := r.currentView(ctx)
	if err != nil {
		return err
	}
	r.history = append(r.history, v)
	if len(r.history) > 8 {
		r.history = r.history[1:]
	}
	return nil
}

// currentView is the world as it is now, in memory: rebuilt from the API
// only after a write happened.
func (r *runner) currentView(ctx context.Context) (*memoryReader, error) {
	if r.view != nil && r.viewAt == r.events {
		return r.view, nil
	}
	objs, err := r.listAll(ctx)
	if err != nil {
		return nil, err
	}
	r.view, r.viewAt = newMemoryReader(r.target.Scheme, objs), r.events
	r.view.indexes = r.indexes
	return r.view, nil
}

// listAll reads every object of the target's kinds from the API.
func (r *runner) listAll(ctx context.Context) ([]client.Object, error) {
	var objs []client.Object
	for _, proto := range r.hooks.Kinds {
		list := proto.DeepCopyObject().(client.ObjectList)
		if err := r.fake.List(ctx, list); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			objs = append(objs, it.(client.Object))
		}
	}
	return objs, nil
}

func (r *runner) staleView(lag int) *memoryReader {
	idx := len(r.history) - 1 - lag
	if idx < 0 {
		idx = 0
	}
	return r.history[idx]
}

// memoryReader serves Get and List from a snapshot of objects: the world as
// it was, for stale reads. It is far cheaper than a fake client per step.
type memoryReader struct {
	scheme  *runtime.Scheme
	objs    []client.Object
	gvks    []schema.GroupVersionKind
	indexes []memoryIndex
}

// memoryIndex is a framework.FieldIndex with its kind resolved.
type memoryIndex struct {
	gvk     schema.GroupVersionKind
	field   string
	extract client.IndexerFunc
}

func memoryIndexes(scheme *runtime.Scheme, in []framework.FieldIndex) ([]memoryIndex, error) {
	out := make([]memoryIndex, 0, len(in))
	for _, ix := range in {
		gvk, err := apiutil.GVKForObject(ix.Object, scheme)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", ix.Field, err)
		}
		out = append(out, memoryIndex{gvk: gvk, field: ix.Field, extract: ix.Extract})
	}
	return out, nil
}

// matchesFields tells whether an object of kind gvk passes a field
// selector, by the indexes: as a cache, it serves only exact matches on
// indexed fields.
func (m *memoryReader) matchesFields(gvk schema.GroupVersionKind, o client.Object, sel fields.Selector) (bool, error) {
	for _, req := range sel.Requirements() {
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return false, fmt.Errorf("field selector %q: only exact matches on indexed fields are served", sel)
		}
		i := slices.IndexFunc(m.indexes, func(ix memoryIndex) bool { return ix.gvk == gvk && ix.field == req.Field })
		if i < 0 {
			return false, fmt.Errorf("no index on %s by %q is registered (sim.Target.Indexes)", gvk.Kind, req.Field)
		}
		if !slices.Contains(m.indexes[i].extract(o), req.Value) {
			return false, nil
		}
	}
	return true, nil
}

// with returns a copy of the view with one change applied; views are
// immutable, so older ones keep serving stale reads.
func (m *memoryReader) with(ch change) *memoryReader {
	ref := ch.new
	if ref == nil {
		ref = ch.old
	}
	gvk, _ := apiutil.GVKForObject(ref, m.scheme)
	key := client.ObjectKeyFromObject(ref)
	out := &memoryReader{scheme: m.scheme, objs: make([]client.Object, 0, len(m.objs)+1), gvks: make([]schema.GroupVersionKind, 0, len(m.objs)+1), indexes: m.indexes}
	for i, o := range m.objs {
		if m.gvks[i] == gvk && client.ObjectKeyFromObject(o) == key {
			continue
		}
		out.objs, out.gvks = append(out.objs, o), append(out.gvks, m.gvks[i])
	}
	if ch.new != nil {
		out.objs, out.gvks = append(out.objs, ch.new), append(out.gvks, gvk)
	}
	return out
}

func newMemoryReader(scheme *runtime.Scheme, objs []client.Object) *memoryReader {
	m := &memoryReader{scheme: scheme, objs: objs, gvks: make([]schema.GroupVersionKind, len(objs))}
	for i, o := range objs {
		m.gvks[i], _ = apiutil.GVKForObject(o, scheme)
	}
	return m
}

func (m *memoryReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, m.scheme)
	if err != nil {
		return err
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		for i, o := range m.objs {
			if m.gvks[i] == gvk && o.GetName() == key.Name && o.GetNamespace() == key.Namespace {
				content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
				if err != nil {
					return err
				}
				u.SetUnstructuredContent(content)
				u.SetGroupVersionKind(gvk)
				return nil
			}
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	}
	for _, o := range m.objs {
		if o.GetName() != key.Name || o.GetNamespace() != key.Namespace {
			continue
		}
		if reflect.TypeOf(o) != reflect.TypeOf(obj) {
			continue
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
		return nil
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
}

func (m *memoryReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	gvk, err := apiutil.GVKForObject(list, m.scheme)
	if err != nil {
		return err
	}
	itemKind := strings.TrimSuffix(gvk.Kind, "List")
	var items []runtime.Object
	for i, o := range m.objs {
		if ogvk := m.gvks[i]; ogvk.Kind != itemKind || ogvk.Group != gvk.Group {
			continue
		}
		if lo.Namespace != "" && o.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
			ok, err := m.matchesFields(m.gvks[i], o, lo.FieldSelector)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		items = append(items, o.DeepCopyObject())
	}
	return meta.SetList(list, items)
}

// volatile fields differ between runs that reach the same state.
var volatile = map[string]bool{
	"resourceVersion": true, "managedFields": true, "creationTimestamp": true, "uid": true,
	"lastTransitionTime": true, "deletionTimestamp": true, "takenAt": true,
}
