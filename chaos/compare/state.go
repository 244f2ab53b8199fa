package compare

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gauntlet-dev/gauntlet/framework/endstate"
)

// State is what a run left once it converged, in a form two runs in
// different namespaces can be compared by: the resource's status without
// timestamps, and its namespace's children (desired state only).
type State struct {
	Status   map[string]any            `json:"status"`
	Children map[string]map[string]any `json:"children"`
	// Writes is how many writes the operator made through the proxy
	// during the run.
	Writes int `json:"writes"`
	// Deleted counts the operator's deletes that succeeded during the
	// run, by resource and name ("statefulsets/db"): a run that deletes
	// what its twin does not has destroyed something, even when its end
	// state, rebuilt since, looks the same.
	Deleted map[string]int `json:"deleted,omitempty"`
	// Spec is the resource's spec at the end (not compared: a
	// differential run creates a fresh resource with it).
	Spec map[string]any `json:"spec,omitempty"`
	// Plural is the resource's plural name and Finalized whether it held
	// a finalizer at the end (neither compared).
	Plural    string `json:"-"`
	Finalized bool   `json:"-"`
}

// Capture reads the end state of the resource gvr ns/name and of the
// children in its namespace; Writes and Deleted are the caller's to fill
// (they are counted by the API proxy, not read).
func Capture(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) (*State, error) {
	u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	st := &State{Children: map[string]map[string]any{}, Plural: gvr.Resource, Finalized: len(u.GetFinalizers()) > 0}
	st.Spec, _, _ = unstructured.NestedMap(u.Object, "spec")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	norm := strings.NewReplacer(ns, "<namespace>", string(u.GetUID()), "<uid>")
	st.Status = normalizeValue(stripStatus(status), norm).(map[string]any)
	children, err := List(ctx, dyn, ns)
	if err != nil {
		return nil, err
	}
	children.Each(func(_ schema.GroupVersionResource, key string, c *unstructured.Unstructured) {
		child := normalizeValue(desired(c), norm).(map[string]any)
		if predates(c, u) {
			child["predatesResource"] = true
		}
		st.Children[key] = child
	})
	return st, nil
}

// predates says whether child was left by an earlier resource of the
// same name (a recreate) and kept: older than the resource, and with no
// owner reference, so that no garbage collection removes it. A child with
// one (owned by the resource, or by a StatefulSet recreated with it) is
// the collector's to remove, and whether it outlived its owner's recreate
// is the collector's race with the operator's first pass, which either
// may win: it says nothing of the operator. A claim whose deletion failed
// and that the new StatefulSet bound is the operator's doing.
func predates(child, resource *unstructured.Unstructured) bool {
	made, created := child.GetCreationTimestamp(), resource.GetCreationTimestamp()
	return made.Before(&created) && len(child.GetOwnerReferences()) == 0
}

// stripStatus drops what differs between two equal runs: timestamps and
// conditions' messages (which quote them); conditions keep type, status
// and reason.
func stripStatus(v map[string]any) map[string]any {
	out := map[string]any{}
	for k, val := range v {
		if strings.Contains(strings.ToLower(k), "time") {
			continue
		}
		if k == "conditions" {
			if list, ok := val.([]any); ok {
				var conds []any
				for _, c := range list {
					if m, ok := c.(map[string]any); ok {
						conds = append(conds, map[string]any{"type": m["type"], "status": m["status"], "reason": m["reason"]})
					}
				}
				out[k] = conds
				continue
			}
		}
		if m, ok := val.(map[string]any); ok {
			out[k] = stripStatus(m)
			continue
		}
		out[k] = val
	}
	return out
}

// desired is a child's desired state: labels, annotations, owners,
// whether it is marked for deletion, spec and data, without what the API server or a random source fills in
// (clusterIPs, bound volume names, Secret values, which may be generated).
// systemAnnotations are written by Kubernetes' own controllers (the
// volume binder, the provisioner, the node a claim was made on), not by
// the operator: when they are there says how far binding got at the
// moment the end state was read, not what the operator wants.
var systemAnnotations = []string{"pv.kubernetes.io/", "volume.kubernetes.io/", "volume.beta.kubernetes.io/"}

func operatorAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if !slices.ContainsFunc(systemAnnotations, func(p string) bool { return strings.HasPrefix(k, p) }) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func desired(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{"labels": u.GetLabels(), "annotations": operatorAnnotations(u.GetAnnotations())}
	var owners []string
	for _, o := range u.GetOwnerReferences() {
		ctl := ""
		if o.Controller != nil && *o.Controller {
			ctl = " (controller)"
		}
		owners = append(owners, o.Kind+"/"+o.Name+ctl)
	}
	out["owners"] = owners
	if u.GetDeletionTimestamp() != nil {
		// Marked for deletion and held by a finalizer (a claim a pod
		// still mounts): on its way out, unlike the same object alive.
		out["deleting"] = true
	}
	if spec, ok, _ := unstructured.NestedMap(u.Object, "spec"); ok {
		for _, f := range []string{"clusterIP", "clusterIPs", "volumeName"} {
			delete(spec, f)
		}
		out["spec"] = spec
	}
	if data, ok, _ := unstructured.NestedMap(u.Object, "data"); ok {
		if u.GetKind() == "Secret" {
			out["dataKeys"] = slices.Sorted(maps.Keys(data))
		} else {
			out["data"] = data
		}
	}
	return out
}

// normalizeValue writes the run's namespace as <namespace> and the
// resource's UID as <uid> in every string, so that two runs compare.
func normalizeValue(v any, ns *strings.Replacer) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[k] = normalizeValue(val, ns)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[k] = ns.Replace(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = normalizeValue(val, ns)
		}
		return out
	case []string:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = ns.Replace(val)
		}
		return out
	case string:
		return ns.Replace(t)
	}
	return v
}

// Show is a value in a few words, as the end-state comparison shows one.
func Show(v any) string { return endstate.Show(reflect.ValueOf(v)) }
