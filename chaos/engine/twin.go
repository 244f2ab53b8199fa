package engine

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/endstate"
)

// childResources are the kinds an operator's children are looked for in,
// in the resource's namespace; the workloads (workloadResources) first.
var childResources = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Version: "v1", Resource: "persistentvolumeclaims"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Group: "batch", Version: "v1", Resource: "cronjobs"},
	{Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
}

// harnessObjects are made by Kubernetes itself in every namespace.
var harnessObjects = []string{"ConfigMap/kube-root-ca.crt", "ServiceAccount/default"}

// endState is what a run left once it converged, in a form two runs in
// different namespaces can be compared by: the resource's status without
// timestamps, and its namespace's children (desired state only).
type endState struct {
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

// captureEnd reads the run's end state.
func (r *run) captureEnd(ctx context.Context) (*endState, error) {
	u, err := r.resource().Get(ctx, r.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	st := &endState{Children: map[string]map[string]any{}, Plural: r.gvr.Resource, Finalized: len(u.GetFinalizers()) > 0}
	st.Spec, _, _ = unstructured.NestedMap(u.Object, "spec")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	norm := strings.NewReplacer(r.ns, "<namespace>", string(u.GetUID()), "<uid>")
	st.Status = normalizeValue(stripStatus(status), norm).(map[string]any)
	for _, gvr := range childResources {
		list, err := r.e.Dynamic.Resource(gvr).Namespace(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			key := c.GetKind() + "/" + c.GetName()
			if c.GetKind() == "" {
				key = gvr.Resource + "/" + c.GetName()
			}
			if slices.Contains(harnessObjects, key) {
				continue
			}
			child := normalizeValue(desired(c), norm).(map[string]any)
			if made, resource := c.GetCreationTimestamp(), u.GetCreationTimestamp(); made.Before(&resource) {
				// Older than the resource it serves: left by an earlier
				// object of the same name (a recreate) and taken over.
				child["predatesResource"] = true
			}
			st.Children[key] = child
		}
	}
	return st, nil
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

// compareTwin judges the faulted run against its fault-free twin: the
// resource's status, its children (missing, leaked, different) and the
// number of writes. Each difference is a check that fails.
func compareTwin(twin, faulted *endState, noise map[string]bool) ([]report.Check, *report.TwinDiff) {
	diff := &report.TwinDiff{TwinWrites: twin.Writes, FaultedWrites: faulted.Writes}
	var kept []report.Difference
	for _, d := range differences(twin, faulted) {
		if noise[generalize(d.Path)] {
			diff.Ignored = append(diff.Ignored, d.Path)
			continue
		}
		kept = append(kept, d)
	}
	kept, permuted := unpermuted(kept)
	diff.Differences, diff.Ignored = kept, append(diff.Ignored, permuted...)
	state := report.Check{Kind: "twin", Name: "end state equals the fault-free twin's", Value: "equal", Budget: "equal"}
	if n := len(diff.Differences); n > 0 {
		state.Value = fmt.Sprintf("%d differences", n)
		first := diff.Differences[0]
		state.Violation = fmt.Sprintf("the end state differs from the fault-free twin's in %d places, first %s: %s in the twin, %s after the fault", n, first.Path, first.Twin, first.Faulted)
	}
	// Faults cost retries; a run that writes far more than its twin is
	// fighting itself.
	limit := 3*twin.Writes + 50
	writes := report.Check{Kind: "twin", Name: "operator writes against the twin's", Value: fmt.Sprintf("%d (twin %d)", faulted.Writes, twin.Writes), Budget: fmt.Sprintf("≤ %d (3× the twin's + 50)", limit)}
	if faulted.Writes > limit {
		writes.Violation = fmt.Sprintf("the operator made %d writes, against %d in the fault-free twin", faulted.Writes, twin.Writes)
	}
	return []report.Check{state, writes, compareDeletes(twin, faulted, noise)}, diff
}

// compareDeletes judges the operator's deletes against its twin's: each
// object deleted more often than the twin deleted it (an object of the
// same name deleted again is another object) is a finding, unless the
// two fault-free runs already deleted that resource differently. A fault
// may cost retries, never an object the twin kept: an operator acting on
// a stale view of a deleted resource deletes its successor's children.
func compareDeletes(twin, faulted *endState, noise map[string]bool) report.Check {
	check := report.Check{Kind: "twin", Name: "operator deletes only what the twin deletes",
		Value: fmt.Sprintf("%d (twin %d)", total(faulted.Deleted), total(twin.Deleted)), Budget: "none the twin does not"}
	var extra []string
	for _, key := range slices.Sorted(maps.Keys(faulted.Deleted)) {
		if n, in := faulted.Deleted[key], twin.Deleted[key]; n > in && !noise[deleteNoise(key)] {
			extra = append(extra, fmt.Sprintf("%s (%s, %s in the twin)", key, times(n), times(in)))
		}
	}
	if len(extra) > 0 {
		check.Violation = "the operator deleted what the fault-free twin did not: " + strings.Join(extra, ", ")
	}
	return check
}

// deleteNoise is the noise key of a deleted object's resource.
func deleteNoise(key string) string {
	resource, _, _ := strings.Cut(key, "/")
	return "deletes of " + resource
}

func times(n int) string {
	switch n {
	case 0:
		return "never"
	case 1:
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// differences lists where end state b differs from a: the status path by
// path, the children a has and b lacks (missing), those only b has
// (leaked), and each child's fields.
func differences(a, b *endState) []report.Difference {
	diffs := endstate.Values("status", a.Status, b.Status)
	diffs = append(diffs, endstate.Objects(a.Children, b.Children)...)
	out := make([]report.Difference, len(diffs))
	for i, d := range diffs {
		out[i] = report.Difference{Path: d.Path, Twin: d.A, Faulted: d.B}
	}
	return out
}

// show is a value in a few words, as the end-state comparison shows one.
func show(v any) string { return endstate.Show(reflect.ValueOf(v)) }

// collectedWithin is how long the garbage collector gets to remove a
// deleted resource's children: it acts within seconds on an idle API
// server, and a child still there after half a minute was never owned.
const collectedWithin = 30 * time.Second

// leftAfterDeletion checks, once the resource is gone, that its namespace
// holds none of the objects an operator makes (Pods and claims aside: the
// StatefulSet's retention policy decides those): what is left leaked.
// Garbage collection gets collectedWithin to remove children with owner references.
func (r *run) leftAfterDeletion(ctx context.Context) {
	// left is the last complete listing: a poll whose list failed keeps
	// the one before, so the violation names what was left.
	var left []string
	err := framework.PollFor(ctx, "the resource's children to be collected", collectedWithin, time.Second, func(ctx context.Context) (bool, string, error) {
		var now []string
		for _, gvr := range childResources {
			if gvr.Resource == "persistentvolumeclaims" {
				continue
			}
			list, err := r.e.Dynamic.Resource(gvr).Namespace(r.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, fmt.Sprintf("listing %s: %v", gvr.Resource, err), nil
			}
			for _, c := range list.Items {
				key := c.GetKind() + "/" + c.GetName()
				if !slices.Contains(harnessObjects, key) {
					now = append(now, key+ownersOf(&c))
				}
			}
		}
		left = now
		return len(left) == 0, fmt.Sprint(left), nil
	})
	c := report.Check{Kind: "operator", Name: "nothing left once the resource is deleted", Value: "nothing", Budget: "nothing after 30s"}
	if err != nil {
		c.Value = strings.Join(left, ", ")
		if len(left) == 0 {
			c.Value = err.Error() // no listing ever completed
		}
		c.Violation = "left behind after the resource was deleted (leaked): " + c.Value
		r.res.Violations = append(r.res.Violations, c.Violation)
	}
	r.res.Checks = append(r.res.Checks, c)
}

func ownersOf(u *unstructured.Unstructured) string {
	refs := u.GetOwnerReferences()
	if len(refs) == 0 {
		return " (no owner reference)"
	}
	var owners []string
	for _, o := range refs {
		owners = append(owners, o.Kind+"/"+o.Name)
	}
	return " (owned by " + strings.Join(owners, ", ") + ")"
}

// learnNoise adds what differs between two fault-free end states to the
// engine's noise.
func (e *Engine) learnNoise(a, b *endState) {
	if e.noise == nil {
		e.noise = map[string]bool{}
	}
	var learned []string
	for _, d := range differences(a, b) {
		g := generalize(d.Path)
		if !e.noise[g] {
			e.noise[g] = true
			learned = append(learned, g)
		}
	}
	deleted := map[string]int{}
	maps.Copy(deleted, a.Deleted)
	maps.Copy(deleted, b.Deleted)
	for _, key := range slices.Sorted(maps.Keys(deleted)) {
		if g := deleteNoise(key); a.Deleted[key] != b.Deleted[key] && !e.noise[g] {
			e.noise[g] = true
			learned = append(learned, g)
		}
	}
	if len(learned) > 0 {
		slices.Sort(learned)
		e.logf("differs between two fault-free runs, so never a finding: %s", strings.Join(learned, ", "))
	}
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// unpermuted sets aside the differences that only move values between
// the items of a list: status.members[0].leader true in the twin and
// status.members[1].leader true after the fault is the same cluster with
// another leader, whoever the two fault-free twins happened to elect.
// Per field of a list's items, when the twin's values at the differing
// items are the faulted run's in another order, none is a finding. The
// same holds for whole items: a Service's ports built from a map come in
// any order, and an item gone at one index and there at another is the
// same list in another order (Kubernetes keys such lists; their order
// says nothing).
func unpermuted(diffs []report.Difference) (kept []report.Difference, permuted []string) {
	groups := map[string][]report.Difference{}
	for _, d := range diffs {
		if g := generalize(d.Path); strings.Contains(g, "[*].") || strings.HasSuffix(g, "[*]") {
			groups[g] = append(groups[g], d)
		}
	}
	moved := map[string]bool{}
	for _, g := range groups {
		var a, b []string
		for _, d := range g {
			a, b = append(a, d.Twin), append(b, d.Faulted)
		}
		slices.Sort(a)
		slices.Sort(b)
		if len(g) > 1 && slices.Equal(a, b) {
			for _, d := range g {
				moved[d.Path] = true
			}
		}
	}
	for _, d := range diffs {
		if moved[d.Path] {
			permuted = append(permuted, d.Path+" (held by another item)")
			continue
		}
		kept = append(kept, d)
	}
	return kept, permuted
}

// generalize writes a path's list indexes as [*]: a member's ID differs
// between runs whichever member it is.
func generalize(path string) string { return listIndex.ReplaceAllString(path, "[*]") }
