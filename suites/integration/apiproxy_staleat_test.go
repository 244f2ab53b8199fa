package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// TestAPIProxyStaleAtResourceVersion: a Stale rule at a resourceVersion
// serves reads exactly as the API server had them then, whatever was
// recorded: a list, a get (NotFound for an object made since), and an
// informer started meanwhile (client-go lists through a watch) whose
// cache holds the old value until the rule is removed, then the new.
func TestAPIProxyStaleAtResourceVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	x := startProxied(t)
	c, err := client.New(x.cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	putConfigMap(t, x.ns, "a", "v1")
	then := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: x.ns, Name: "a"}, then)).To(Succeed())
	putConfigMap(t, x.ns, "a", "v2")
	putConfigMap(t, x.ns, "b", "v1")

	// Cluster-wide requests match the namespaced rule, as a cache's do.
	stale := x.add(t, apiproxy.Rule{Resource: "configmaps", Namespace: x.ns, Stale: true, AtResourceVersion: then.ResourceVersion})
	got := &corev1.ConfigMapList{}
	g.Expect(c.List(ctx, got, client.InNamespace(x.ns))).To(Succeed())
	g.Expect(got.Items).To(HaveLen(1), "b did not exist then")
	g.Expect(got.Items[0].Data["k"]).To(Equal("v1"))
	one := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: x.ns, Name: "a"}, one)).To(Succeed())
	g.Expect(one.Data["k"]).To(Equal("v1"))
	err = c.Get(ctx, client.ObjectKey{Namespace: x.ns, Name: "b"}, one)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "b did not exist then: %v", err)

	i := startInformer(t, x)
	g.Expect(i.value("a")()).To(Equal("v1"), "the informer's initial list is as of the rule's resourceVersion")
	g.Expect(i.value("b")()).To(Equal("(not in the cache)"))
	g.Expect(x.whats()).To(ContainElement(HavePrefix("served the watch-list's 1 initial events as of resourceVersion ")))

	x.p.Remove(stale)
	g.Eventually(i.value("a")).WithTimeout(proxyWait).Should(Equal("v2"), "caught up once the rule is removed")
	g.Eventually(i.value("b")).WithTimeout(proxyWait).Should(Equal("v1"))
}
