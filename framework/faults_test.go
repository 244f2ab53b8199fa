package framework

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestFaultsMatchAndAct(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		fault Fault
		ops   []op
		// fail lists, per op, whether the fault failed it.
		fail []bool
	}{
		{"verb and kind", Fault{Verb: "get", Kind: "ConfigMap", Err: boom},
			[]op{getA, getSecret, listCMs, getB}, []bool{true, false, false, true}},
		{"namespace and name", Fault{Verb: "get", Namespace: "ns", Name: "b", Err: boom},
			[]op{getA, getB, getA}, []bool{false, true, false}},
		{"a list by kind and namespace, never by name", Fault{Verb: "list", Kind: "ConfigMap", Namespace: "ns", Err: boom},
			[]op{listCMs, listCMsOther, listPods, getA}, []bool{true, false, false, false}},
		{"the Nth matching call only", Fault{Verb: "get", Kind: "ConfigMap", Nth: 2, Err: boom},
			[]op{getA, getSecret, getB, getA}, []bool{false, false, true, false}},
		{"the first Times matching calls", Fault{Verb: "get", Times: 2, Err: boom},
			[]op{getSecret, getA, getA}, []bool{true, true, false}},
		{"a subresource write by its own verb", Fault{Verb: "update/status", Kind: "Pod", Err: boom},
			[]op{podUpdate, podStatus}, []bool{false, true}},
		{"any write", Fault{Verb: AnyWrite, Nth: 3, Err: boom},
			[]op{getA, createC, patchA, listCMs, applyA, updateA}, []bool{false, false, false, false, true, false}},
		{"apply by kind and name", Fault{Verb: "apply", Kind: "ConfigMap", Name: "a", Err: boom},
			[]op{applyA, patchA}, []bool{true, false}},
		{"every call", Fault{Err: boom},
			[]op{getA, listPods, createC}, []bool{true, true, true}},
		{"a crash fails its call and every later one", Fault{Verb: AnyWrite, Nth: 2, Crash: true, Err: boom},
			[]op{createC, getA, patchA, getA, listPods}, []bool{false, false, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			fake := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{
				cmIn("ns", "a"), cmIn("ns", "b"),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}},
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
			}})
			faults := &Faults{}
			c := faults.Client(fake)
			faults.Add(tc.fault)
			failed := 0
			for i, o := range tc.ops {
				err := o.do(ctx, c)
				if tc.fail[i] {
					failed++
					g.Expect(err).To(MatchError(boom), "call %d, %s", i, o.name)
				} else {
					g.Expect(err).NotTo(HaveOccurred(), "call %d, %s", i, o.name)
				}
			}
			g.Expect(faults.Injected()).To(Equal(failed))
			g.Expect(faults.Crashed()).To(Equal(tc.fault.Crash))
			faults.Clear()
			for i, o := range tc.ops {
				g.Expect(o.do(ctx, c)).To(Succeed(), "after Clear: call %d, %s", i, o.name)
			}
		})
	}
}

func TestFaultsCountEachFaultsOwnCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	fake := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{cmIn("ns", "a")}})
	faults := &Faults{}
	c := faults.Client(fake)
	faults.Add(Fault{Verb: "get", Nth: 1, Err: ErrServerTimeout})
	faults.Add(Fault{Verb: "get", Nth: 2, Err: ErrInternal})
	g.Expect(apierrors.IsServerTimeout(getA.do(ctx, c))).To(BeTrue(), "the first fault fails the first get")
	g.Expect(apierrors.IsInternalError(getA.do(ctx, c))).To(BeTrue(), "the second counted the first get too")
	g.Expect(getA.do(ctx, c)).To(Succeed())
	g.Expect(faults.Injected()).To(Equal(2))
}

// TestFaultsWrapAClientThatCannotWatch: envtest's and a manager's clients
// do not watch; Wrap takes them as they are.
func TestFaultsWrapAClientThatCannotWatch(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	fake := NewFakeClient(clientgoscheme.Scheme, FakeClientOptions{Objects: []client.Object{cmIn("ns", "a")}})
	faults := &Faults{}
	log := &WriteLog{}
	c := log.Wrap(faults.Wrap(struct{ client.Client }{fake}))
	faults.Add(Fault{Verb: "patch", Err: ErrConflict("configmaps", "a"), Times: 1})
	g.Expect(apierrors.IsConflict(patchA.do(ctx, c))).To(BeTrue())
	g.Expect(patchA.do(ctx, c)).To(Succeed())
	g.Expect(getA.do(ctx, c)).To(Succeed())
	_, err := c.(client.WithWatch).Watch(ctx, &corev1.ConfigMapList{})
	g.Expect(err).To(MatchError(ContainSubstring("cannot watch")))
	g.Expect(FormatWrites(log.All())).To(Equal("  patch ConfigMap ns/a\n  patch ConfigMap ns/a"))
}
