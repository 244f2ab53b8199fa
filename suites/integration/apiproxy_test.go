package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// operatorToken makes a ServiceAccount that may only work with ConfigMaps
// and StatefulSets, and read Pods, in ns, and returns a token for it: an
// operator's credentials.
func operatorToken(t *testing.T, ns string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	g.Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator"}})).To(Succeed())
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	g.Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: all},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: all},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	}})).To(Succeed())
	g.Expect(c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "operator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "operator"}},
	})).To(Succeed())
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "operator",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// TestAPIProxy: an operator's client through the proxy reads, writes,
// applies and watches as it would directly, with its own token and no more
// (a Secret stays forbidden); armed rules answer with API errors that
// clients handle as the real thing, and every request is recorded.
func TestAPIProxy(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t, "apiproxy-")
	p, err := apiproxy.Start(env.Config, 7)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Close() })
	cfg := p.Config(operatorToken(t, ns))
	c, err := client.NewWithWatch(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v"}}
	}
	w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	g.Expect(c.Create(ctx, cm("a"))).To(Succeed())
	g.Eventually(w.ResultChan()).WithTimeout(10*time.Second).Should(Receive(WithTransform(
		func(e watch.Event) string { return fmt.Sprint(e.Type, " ", e.Object.(*corev1.ConfigMap).Name) }, Equal("ADDED a"))),
		"the watch through the proxy delivers the create")
	g.Expect(c.Apply(ctx, corev1ac.ConfigMap("b", ns).WithData(map[string]string{"k": "applied"}),
		client.FieldOwner("operator"), client.ForceOwnership)).To(Succeed(), "server-side apply")
	list := &corev1.ConfigMapList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2), "a and b")
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "anything"}, &corev1.Secret{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the operator's own permissions, no more: %v", err)

	_, err = p.Add(apiproxy.Rule{Verb: "create", Resource: "configmaps", Count: 1, Status: http.StatusConflict})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsConflict(c.Create(ctx, cm("c")))).To(BeTrue(), "the first create answered 409")
	g.Expect(c.Create(ctx, cm("c"))).To(Succeed(), "the rule was spent")
	_, err = p.Add(apiproxy.Rule{Verb: "get", Resource: "configmaps", Name: "c", Count: 1, Status: http.StatusTooManyRequests, RetryAfter: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm("c")), &corev1.ConfigMap{})).To(Succeed(),
		"client-go waits out a 429's Retry-After and asks again")

	var injected []string
	for _, r := range p.Requests() {
		if r.Injected != "" {
			injected = append(injected, fmt.Sprintf("%s → %d (%s)", r.Info, r.Status, r.Injected))
		}
	}
	g.Expect(injected).To(Equal([]string{
		fmt.Sprintf("create configmaps %s/ → 409 (409 on create configmaps (once))", ns),
		fmt.Sprintf("get configmaps %s/c → 429 (429 on get configmaps */c (once))", ns),
	}))
}
