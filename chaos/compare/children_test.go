package compare

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

func object(apiVersion, kind, ns, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetOwnerReferences(owners)
	return u
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	lists := map[schema.GroupVersionResource]string{}
	for _, gvr := range ChildResources {
		lists[gvr] = "List" // the fake only needs a list kind for each resource
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)
}

// TestListingOfChildren: every child kind is listed in the namespace
// asked, Kubernetes' own objects are left out, an object is keyed by its
// kind, and OwnedBy names what has an owner reference to the resource by
// the proxy's resource/name, controller or not.
func TestListingOfChildren(t *testing.T) {
	g := NewWithT(t)
	owner := metav1.OwnerReference{APIVersion: "db.example.com/v1", Kind: "Database", Name: "db", UID: "uid-1"}
	controller := owner
	controller.Controller = new(true)
	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "old", UID: "uid-2"}
	dyn := fakeDynamic(
		object("apps/v1", "StatefulSet", "ns", "db", controller),
		object("v1", "Service", "ns", "db", owner),
		object("v1", "PersistentVolumeClaim", "ns", "data-db-0", other),
		object("v1", "ConfigMap", "ns", "kube-root-ca.crt"),
		object("v1", "ServiceAccount", "ns", "default"),
		object("v1", "ConfigMap", "elsewhere", "db", owner),
	)
	listed, err := List(t.Context(), dyn, "ns")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(HaveLen(len(ChildResources)))

	var keys []string
	listed.Each(func(_ schema.GroupVersionResource, key string, _ *unstructured.Unstructured) {
		keys = append(keys, key)
	})
	g.Expect(keys).To(Equal([]string{"StatefulSet/db", "Service/db", "PersistentVolumeClaim/data-db-0"}))
	g.Expect(listed.OwnedBy("uid-1")).To(Equal(map[string]bool{"statefulsets/db": true, "services/db": true}))
	g.Expect(listed.OwnedBy("uid-3")).To(BeEmpty())
}

// TestListingOfSomeKinds: the kinds given are listed in their order, and
// a kind that cannot be listed is named in the error and left out of a
// listing that keeps the others.
func TestListingOfSomeKinds(t *testing.T) {
	g := NewWithT(t)
	dyn := fakeDynamic(object("apps/v1", "Deployment", "ns", "web"))
	listed, err := List(t.Context(), dyn, "ns", ChildResources[1], ChildResources[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed).To(HaveLen(2))
	g.Expect(listed[0].Resource.Resource).To(Equal("deployments"))
	g.Expect(listed[0].List.Items).To(HaveLen(1))

	dyn.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	listed, err = List(t.Context(), dyn, "ns")
	g.Expect(err).To(MatchError(ContainSubstring("listing secrets: forbidden")))
	g.Expect(listed).To(HaveLen(len(ChildResources) - 1))
	for _, l := range listed {
		g.Expect(l.Resource.Resource).NotTo(Equal("secrets"))
	}
}

// TestKeyWithoutKind: an object a list returned without its kind is
// keyed by its resource.
func TestKeyWithoutKind(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName("db")
	if got := Key(ChildResources[0], u); got != "statefulsets/db" {
		t.Fatalf("Key = %q, want statefulsets/db", got)
	}
}
