package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// ForeignChildError says that an object the cluster needs exists and is
// controlled by something else.
type ForeignChildError struct {
	Kind string
	Name string
}

func (e *ForeignChildError) Error() string {
	return fmt.Sprintf("%s %q exists and is not controlled by this DatabaseCluster; the operator will neither adopt nor overwrite it: delete or rename it", e.Kind, e.Name)
}

// applyChild writes the desired state of one child with server-side apply,
// under FieldOwner with forced ownership, unless the fields this operator
// owns on the existing object already hold exactly the desired values: then it
// writes nothing, so a converged pass leaves every resourceVersion unchanged
// (and makes no API call). existing is filled from the API; extract returns
// the configuration FieldOwner has applied to it.
//
// A child that exists but is controlled by another owner is never touched:
// applyChild returns a *ForeignChildError.
//
// Comparing costs more than the rest of a steady-state pass, so a match is
// remembered in seen by the object's UID and resourceVersion: while neither
// the object nor the desired configuration changes, the next pass trusts it.
func applyChild[T client.Object, A runtime.ApplyConfiguration](
	ctx context.Context, c client.Client, seen *appliedCache, owner *dbv1.DatabaseCluster, kind string,
	existing T, desired A, extract func(T, string) (A, error),
) (changed bool, err error) {
	key := client.ObjectKeyFromObject(existing)
	desiredJSON, err := json.Marshal(desired)
	if err != nil {
		return false, fmt.Errorf("encoding desired %s: %w", kind, err)
	}
	switch err := c.Get(ctx, key, existing); {
	case apierrors.IsNotFound(err):
		// Create it below.
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", kind, err)
	case !metav1.IsControlledBy(existing, owner):
		return false, &ForeignChildError{Kind: kind, Name: key.Name}
	case seen.matches(kind, existing, desiredJSON):
		return false, nil
	default:
		applied, err := extract(existing, FieldOwner)
		if err != nil {
			return false, fmt.Errorf("extracting applied %s: %w", kind, err)
		}
		same, err := sameConfiguration(applied, desired)
		if err != nil {
			return false, fmt.Errorf("comparing applied %s: %w", kind, err)
		}
		if same {
			seen.remember(kind, existing, desiredJSON)
			return false, nil
		}
	}
	if err := c.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %s: %w", kind, err)
	}
	return true, nil
}

// sameConfiguration compares two apply configurations as the API would see
// them: as JSON, without any status (the object's own is written by other
// controllers through the status subresource; a claim template's is
// defaulted by the API server inside an atomic list) and without empty
// values, which serialise the same as absent ones.
func sameConfiguration(a, b any) (bool, error) {
	na, err := normalized(a)
	if err != nil {
		return false, err
	}
	nb, err := normalized(b)
	if err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(na, nb), nil
}

func normalized(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	dropEmbeddedTypeMeta(m)
	return prune(m), nil
}

// dropEmbeddedTypeMeta removes kind and apiVersion from the claim templates
// a StatefulSet embeds. The API server's JSON carries them (and a Pending
// phase) while its protobuf does not, so an object decoded from JSON, as
// every client that asks for JSON gets it, would never match the desired
// configuration: each pass would apply again, a write that changes nothing
// and triggers no event, and Progressing would never clear.
func dropEmbeddedTypeMeta(m map[string]any) {
	spec, _ := m["spec"].(map[string]any)
	templates, _ := spec["volumeClaimTemplates"].([]any)
	for _, t := range templates {
		if tm, ok := t.(map[string]any); ok {
			delete(tm, "kind")
			delete(tm, "apiVersion")
		}
	}
}

// prune drops status, nulls, empty maps and empty lists, recursively.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		delete(t, "status")
		for k, child := range t {
			if p := prune(child); isEmpty(p) {
				delete(t, k)
			} else {
				t[k] = p
			}
		}
		return t
	case []any:
		out := t[:0]
		for _, child := range t {
			out = append(out, prune(child))
		}
		return out
	default:
		return v
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	default:
		return false
	}
}

// appliedCache remembers, per child, the version of the object last found to
// match a desired configuration. The zero value is ready to use; a fresh
// reconciler starts empty and compares again.
type appliedCache struct {
	mu      sync.Mutex
	entries map[string]appliedEntry
}

type appliedEntry struct {
	uid             types.UID
	resourceVersion string
	desired         string
}

func (a *appliedCache) key(kind string, obj client.Object) string {
	return kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

func (a *appliedCache) matches(kind string, obj client.Object, desired []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[a.key(kind, obj)]
	return ok && obj.GetResourceVersion() != "" && e.uid == obj.GetUID() && e.resourceVersion == obj.GetResourceVersion() && e.desired == string(desired)
}

func (a *appliedCache) remember(kind string, obj client.Object, desired []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.entries == nil {
		a.entries = map[string]appliedEntry{}
	}
	a.entries[a.key(kind, obj)] = appliedEntry{uid: obj.GetUID(), resourceVersion: obj.GetResourceVersion(), desired: string(desired)}
}
