package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// TestFaultsOnARealAPIServer: the fault layer the unit and simulation tiers
// use wraps an envtest client the same way. A matching call fails with the
// injected error and never reaches the API server; the others go through.
func TestFaultsOnARealAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "faults")
	faults := &framework.Faults{}
	c := faults.Wrap(env.Client)
	faults.Add(framework.Fault{Verb: "create", Kind: "ConfigMap", Times: 1, Err: framework.ErrConflict("configmaps", "a")})
	faults.Add(framework.Fault{Verb: "patch", Kind: "ConfigMap", Name: "b", Crash: true, Err: framework.ErrServerTimeout})

	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v"}}
	}
	g.Expect(apierrors.IsConflict(c.Create(ctx, cm("a")))).To(BeTrue(), "the first create fails with the injected 409")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cm("a")), &corev1.ConfigMap{}))).
		To(BeTrue(), "the failed create never reached the API server")
	g.Expect(c.Create(ctx, cm("a"))).To(Succeed(), "the fault was spent after one call")
	g.Expect(c.Create(ctx, cm("b"))).To(Succeed())

	patch := client.MergeFrom(cm("b"))
	changed := cm("b")
	changed.Data["k"] = "w"
	g.Expect(apierrors.IsServerTimeout(c.Patch(ctx, changed, patch))).To(BeTrue(), "the patch of b crashes the client")
	g.Expect(faults.Crashed()).To(BeTrue())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm("a")), &corev1.ConfigMap{})).
		To(MatchError(framework.ErrServerTimeout), "after a crash every call fails, whatever it matches")
	g.Expect(faults.Injected()).To(Equal(3))

	faults.Clear()
	got := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm("b")), got)).To(Succeed())
	g.Expect(got.Data).To(HaveKeyWithValue("k", "v"), "the crashed patch never reached the API server")
}
