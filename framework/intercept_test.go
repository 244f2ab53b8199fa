package framework

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// op is one client call a test makes.
type op struct {
	name string
	do   func(ctx context.Context, c client.Client) error
}

func cmIn(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

var (
	getA = op{"get ConfigMap ns/a", func(ctx context.Context, c client.Client) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a"}, &corev1.ConfigMap{})
	}}
	getB = op{"get ConfigMap ns/b", func(ctx context.Context, c client.Client) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "b"}, &corev1.ConfigMap{})
	}}
	getSecret = op{"get Secret ns/s", func(ctx context.Context, c client.Client) error {
		return c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "s"}, &corev1.Secret{})
	}}
	listCMs = op{"list ConfigMaps in ns", func(ctx context.Context, c client.Client) error {
		return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("ns"))
	}}
	listCMsOther = op{"list ConfigMaps in other", func(ctx context.Context, c client.Client) error {
		return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("other"))
	}}
	listPods = op{"list Pods in ns", func(ctx context.Context, c client.Client) error {
		return c.List(ctx, &corev1.PodList{}, client.InNamespace("ns"))
	}}
	updateA = op{"update ConfigMap ns/a", func(ctx context.Context, c client.Client) error {
		a := cmIn("ns", "a")
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		return c.Update(ctx, a)
	}}
	patchA = op{"patch ConfigMap ns/a", func(ctx context.Context, c client.Client) error {
		return c.Patch(ctx, cmIn("ns", "a"), client.RawPatch("application/merge-patch+json", []byte(`{"data":{"k":"v"}}`)))
	}}
	applyA = op{"apply ConfigMap ns/a", func(ctx context.Context, c client.Client) error {
		return c.Apply(ctx, corev1ac.ConfigMap("a", "ns").WithData(map[string]string{"x": "y"}), client.FieldOwner("test"))
	}}
	createC = op{"create ConfigMap ns/c", func(ctx context.Context, c client.Client) error {
		return client.IgnoreAlreadyExists(c.Create(ctx, cmIn("ns", "c")))
	}}
	podStatus = op{"update/status Pod ns/p", func(ctx context.Context, c client.Client) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		return c.Status().Update(ctx, p)
	}}
	podUpdate = op{"update Pod ns/p", func(ctx context.Context, c client.Client) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		return c.Update(ctx, p)
	}}
)

// TestInterceptSeesEveryCall: one hook sees reads, writes, watches and
// subresource calls with their verb, kind and key, makes the call in
// between, and hears its outcome; InterceptWrites sees the writes alone.
func TestInterceptSeesEveryCall(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	fake := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{
		cmIn("ns", "a"), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
	}})
	var seen, writes []string
	outcomes := 0
	all := interceptor.NewClient(fake, Intercept(func(_ context.Context, c client.Client, call Call) (func(error), error) {
		seen = append(seen, call.Verb+" "+call.Kind(c.Scheme())+" "+call.Key().String())
		return func(error) { outcomes++ }, nil
	}))
	c := interceptor.NewClient(all, InterceptWrites(func(_ context.Context, c client.Client, call Call) (func(error), error) {
		g.Expect(call.Write()).To(BeTrue())
		writes = append(writes, call.Verb)
		return nil, nil
	}))

	pod := &corev1.Pod{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "p"}, pod)).To(Succeed())
	g.Expect(c.List(ctx, &corev1.PodList{}, client.InNamespace("ns"))).To(Succeed())
	w, err := c.Watch(ctx, &corev1.ConfigMapList{})
	g.Expect(err).NotTo(HaveOccurred())
	w.Stop()
	g.Expect(createC.do(ctx, c)).To(Succeed())
	g.Expect(updateA.do(ctx, c)).To(Succeed())
	g.Expect(patchA.do(ctx, c)).To(Succeed())
	g.Expect(applyA.do(ctx, c)).To(Succeed())
	g.Expect(c.Status().Update(ctx, pod)).To(Succeed())
	g.Expect(c.Status().Patch(ctx, pod, client.MergeFrom(pod.DeepCopy()))).To(Succeed())
	_ = c.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{})
	_ = c.SubResource("ephemeralcontainers").Get(ctx, pod, &corev1.Pod{})
	_ = c.Status().Apply(ctx, corev1ac.Pod("p", "ns").WithStatus(corev1ac.PodStatus().WithMessage("m")), client.FieldOwner("test"))
	g.Expect(c.Delete(ctx, cmIn("ns", "c"))).To(Succeed())
	g.Expect(c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("ns"))).To(Succeed())

	g.Expect(seen).To(Equal([]string{
		"get Pod ns/p",
		"list Pod ns/",
		"watch ConfigMap /",
		"create ConfigMap ns/c",
		"get ConfigMap ns/a", "update ConfigMap ns/a",
		"patch ConfigMap ns/a",
		"apply ConfigMap ns/a",
		"update/status Pod ns/p",
		"patch/status Pod ns/p",
		"create/eviction Pod ns/p",
		"get/ephemeralcontainers Pod ns/p",
		"apply/status Pod ns/p",
		"delete ConfigMap ns/c",
		"deleteAllOf ConfigMap /",
	}))
	g.Expect(outcomes).To(Equal(len(seen)), "every call reports its outcome")
	g.Expect(writes).To(Equal([]string{"create", "update", "patch", "apply", "update/status", "patch/status", "create/eviction", "apply/status", "delete", "deleteAllOf"}))
}

func TestCallTarget(t *testing.T) {
	g := NewWithT(t)
	scheme := clientgoscheme.Scheme
	obj, err := Call{Verb: "apply", Apply: corev1ac.ConfigMap("a", "ns")}.Target(scheme)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obj).To(Equal(cmIn("ns", "a")))
	_, err = Call{Verb: "apply", Apply: corev1ac.ConfigMap("", "ns")}.Target(scheme)
	g.Expect(err).To(HaveOccurred(), "an unnamed configuration has no target")
	cm := cmIn("ns", "b")
	obj, err = Call{Verb: "update", Object: cm}.Target(scheme)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obj).To(BeIdenticalTo(cm))
	_, err = Call{Verb: "list", List: &corev1.ConfigMapList{}}.Target(scheme)
	g.Expect(err).To(HaveOccurred())
}
