package compare

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ChildResources are the kinds an operator's children are looked for in,
// in the resource's namespace; the workloads first.
var ChildResources = []schema.GroupVersionResource{
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

// HarnessObjects are made by Kubernetes itself in every namespace.
var HarnessObjects = []string{"ConfigMap/kube-root-ca.crt", "ServiceAccount/default"}

// Listing is what one namespace held of some kinds, listed one kind after
// another: each list keeps its resourceVersion, to watch from.
type Listing []Listed

// Listed is one kind's list.
type Listed struct {
	Resource schema.GroupVersionResource
	List     *unstructured.UnstructuredList
}

// List lists kinds (ChildResources when none are given) in namespace ns,
// in that order. Every kind that can be listed is in the listing; the
// error names each one that could not be, so that a caller to whom a
// partial listing is worth something (best effort) can still use it.
func List(ctx context.Context, dyn dynamic.Interface, ns string, kinds ...schema.GroupVersionResource) (Listing, error) {
	if len(kinds) == 0 {
		kinds = ChildResources
	}
	out := make(Listing, 0, len(kinds))
	var errs []error
	for _, gvr := range kinds {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", gvr.Resource, err))
			continue
		}
		out = append(out, Listed{Resource: gvr, List: list})
	}
	return out, errors.Join(errs...)
}

// Each calls f with every object listed but Kubernetes' own
// (HarnessObjects), in the listing's order, with its Key.
func (l Listing) Each(f func(gvr schema.GroupVersionResource, key string, u *unstructured.Unstructured)) {
	for _, ld := range l {
		for i := range ld.List.Items {
			u := &ld.List.Items[i]
			if key := Key(ld.Resource, u); !slices.Contains(HarnessObjects, key) {
				f(ld.Resource, key, u)
			}
		}
	}
}

// OwnedBy are the objects listed with an owner reference to uid, as
// "<resource>/<name>" (statefulsets/db): the API proxy's names for them.
func (l Listing) OwnedBy(uid string) map[string]bool {
	out := map[string]bool{}
	l.Each(func(gvr schema.GroupVersionResource, _ string, u *unstructured.Unstructured) {
		if slices.ContainsFunc(u.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return string(o.UID) == uid }) {
			out[gvr.Resource+"/"+u.GetName()] = true
		}
	})
	return out
}

// Key names an object as "<Kind>/<name>" (ConfigMap/db-config), or by
// its resource when the list carried no kind.
func Key(gvr schema.GroupVersionResource, u *unstructured.Unstructured) string {
	if u.GetKind() == "" {
		return gvr.Resource + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetName()
}
