package framework

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// FakeClientOptions configure NewFakeClient.
type FakeClientOptions struct {
	// Objects are created before the client is returned.
	Objects []client.Object
	// StatusSubresources are the kinds whose status is a subresource (custom
	// kinds as their CRDs declare, and built-in ones such as Deployments).
	// Pods and StatefulSets are included whenever the scheme knows them.
	StatusSubresources []client.Object
	// Interceptors wrap every call, for example Faults.Funcs().
	Interceptors *interceptor.Funcs
	// Indexes are the field indexes the code under test lists by
	// (client.MatchingFields), as its manager's cache registers them.
	Indexes []FieldIndex
	// RESTMapper, if set, is reused instead of building one from the
	// scheme (which is the slow part of building a fake client).
	RESTMapper meta.RESTMapper
}

// FieldIndex is a field index a controller registers with its manager's
// cache (mgr.GetFieldIndexer().IndexField) and lists by with
// client.MatchingFields. A fake client, or a simulation, that serves the
// controller needs the same indexes: without them such a List fails.
type FieldIndex struct {
	// Object is an empty object of the indexed kind.
	Object client.Object
	// Field names the index.
	Field string
	// Extract gives an object's values under the index.
	Extract client.IndexerFunc
}

// NewFakeClient returns a fake client configured as close to an API server as
// the fake allows: status is a subresource (a spec write cannot change it and
// a status write cannot change the spec), and server-side apply records
// managed fields and returns them, so that code comparing what it applied
// with what is stored behaves as it does against a server.
//
// The fake still runs no validation, defaulting, admission, garbage
// collection or controllers; anything that needs those belongs in envtest.
func NewFakeClient(scheme *runtime.Scheme, o FakeClientOptions) client.WithWatch {
	var status []client.Object
	for _, builtin := range []client.Object{&corev1.Pod{}, &appsv1.StatefulSet{}} {
		if gvks, _, err := scheme.ObjectKinds(builtin); err == nil && len(gvks) > 0 {
			status = append(status, builtin)
		}
	}
	status = append(status, o.StatusSubresources...)
	b := fake.NewClientBuilder().
		WithScheme(scheme).
		WithStatusSubresource(status...).
		WithReturnManagedFields().
		WithObjects(o.Objects...)
	if o.RESTMapper != nil {
		b = b.WithRESTMapper(o.RESTMapper)
	}
	for _, ix := range o.Indexes {
		b = b.WithIndex(ix.Object, ix.Field, ix.Extract)
	}
	if o.Interceptors != nil {
		b = b.WithInterceptorFuncs(*o.Interceptors)
	}
	return b.Build()
}
