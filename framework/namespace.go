package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewNamespace creates a namespace with a generated name (prefix plus a
// random suffix) for one test and deletes it when the test ends.
func NewNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		// The test's context is done by now; cleanup gets its own.
		ctx, cancel := cleanupContext(t)
		defer cancel()
		_ = c.Delete(ctx, ns)
	})
	return ns.Name
}

// DeleteAllAndWait deletes every object of the given kind in a namespace and
// waits until they are gone (finalizers included), so that a test leaves no
// controller work behind. proto is an empty object of the kind; list an
// empty list of it.
func DeleteAllAndWait(t testing.TB, c client.Client, namespace string, proto client.Object, list client.ObjectList) {
	t.Helper()
	ctx, cancel := cleanupContext(t)
	defer cancel()
	if err := c.DeleteAllOf(ctx, proto, client.InNamespace(namespace)); err != nil {
		t.Errorf("cleanup: deleting %T in %s: %v", proto, namespace, err)
		return
	}
	err := PollFor(ctx, fmt.Sprintf("every %T in %s to be deleted", proto, namespace), 30*time.Second, 100*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
				return false, err.Error(), nil
			}
			n := meta.LenList(l)
			return n == 0, fmt.Sprintf("%d left", n), nil
		})
	if err != nil {
		t.Errorf("cleanup: %v", err)
	}
}
