package integration

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// TestAPIProxyStaleList: with a Stale rule armed, a list through the proxy
// answers what it answered before the change, resourceVersion and all;
// removed, the list is current again.
func TestAPIProxyStaleList(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	x := startProxied(t)
	c, err := client.New(x.cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	putConfigMap(t, x.ns, "a", "v1")
	before := &corev1.ConfigMapList{}
	g.Expect(c.List(ctx, before, client.InNamespace(x.ns))).To(Succeed())
	putConfigMap(t, x.ns, "a", "v2")

	stale := x.add(t, apiproxy.Rule{Verb: "list", Resource: "configmaps", Namespace: x.ns, Stale: true})
	got := &corev1.ConfigMapList{}
	g.Expect(c.List(ctx, got, client.InNamespace(x.ns))).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(before.ResourceVersion))
	g.Expect(got.Items).To(HaveLen(1))
	g.Expect(got.Items[0].Data["k"]).To(Equal("v1"))
	g.Expect(x.whats()).To(ContainElement(HavePrefix("served the list recorded at ")))

	x.p.Remove(stale)
	g.Expect(c.List(ctx, got, client.InNamespace(x.ns))).To(Succeed())
	g.Expect(got.ResourceVersion).NotTo(Equal(before.ResourceVersion))
	g.Expect(got.Items[0].Data["k"]).To(Equal("v2"))
}

// TestAPIProxyAfterWrite: Then runs once, right after the second matching
// patch succeeded, with that request; other writes do not count.
func TestAPIProxyAfterWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	x := startProxied(t)
	c, err := client.New(x.cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	putConfigMap(t, x.ns, "a", "v1")
	putConfigMap(t, x.ns, "b", "v1")
	var calls atomic.Int32
	fired := make(chan apiproxy.Request, 4)
	x.add(t, apiproxy.Rule{Verb: "patch", Resource: "configmaps", Name: "a", After: 2, Then: func(r apiproxy.Request) {
		calls.Add(1)
		fired <- r
	}})
	patch := func(name, v string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: name}}
		g.Expect(c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":%q}}`, v)))).To(Succeed())
	}
	patch("a", "v2")
	patch("b", "v2")
	g.Expect(calls.Load()).To(BeZero(), "one matching write so far")
	patch("a", "v3")
	var r apiproxy.Request
	g.Eventually(fired).WithTimeout(proxyWait).Should(Receive(&r))
	patch("a", "v4")
	g.Expect(calls.Load()).To(Equal(int32(1)), "spent after firing")
	g.Expect(r.Info.String()).To(Equal("patch configmaps " + x.ns + "/a"))
	g.Expect(r.Status).To(Equal(http.StatusOK))
	var patches []time.Time
	for _, req := range x.p.Requests() {
		if req.Info.Verb == "patch" && req.Info.Name == "a" {
			patches = append(patches, req.At)
		}
	}
	g.Expect(patches).To(HaveLen(3))
	g.Expect(r.At).To(Equal(patches[1]), "the second patch of a")
	g.Eventually(x.p.Writes).WithTimeout(proxyWait).Should(Equal(4))
	g.Expect(x.whats()).To(ContainElement("after 2nd write: then"))
}

// TestAPIProxyTimeout: a held request times out on the client's own
// deadline; without one, the proxy answers 504 at the rule's cap.
func TestAPIProxyTimeout(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	x := startProxied(t)
	putConfigMap(t, x.ns, "a", "v1")
	impatient := rest.CopyConfig(x.cfg)
	impatient.Timeout = 2 * time.Second
	cs, err := kubernetes.NewForConfig(impatient)
	g.Expect(err).NotTo(HaveOccurred())
	x.add(t, apiproxy.Rule{Verb: "get", Resource: "configmaps", Name: "a", Count: 1, Timeout: true})
	start := time.Now()
	_, err = cs.CoreV1().ConfigMaps(x.ns).Get(ctx, "a", metav1.GetOptions{})
	var ne net.Error
	g.Expect(errors.As(err, &ne) && ne.Timeout()).To(BeTrue(), "a client timeout: %v", err)
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))

	cs, err = kubernetes.NewForConfig(x.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	x.add(t, apiproxy.Rule{Verb: "get", Resource: "configmaps", Name: "a", Count: 1, Timeout: true, TimeoutAfter: time.Second})
	_, err = cs.CoreV1().ConfigMaps(x.ns).Get(ctx, "a", metav1.GetOptions{})
	g.Expect(apierrors.IsTimeout(err)).To(BeTrue(), "a 504 at the cap: %v", err)
	_, err = cs.CoreV1().ConfigMaps(x.ns).Get(ctx, "a", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "both rules spent")
	g.Eventually(x.whats).WithTimeout(proxyWait).Should(HaveExactElements(
		// The proxy's clock starts a little after the client's.
		MatchRegexp(`^held the request until the client gave up after (1\.9\d|2(\.\d+)?)s$`),
		MatchRegexp(`^held the request 1(\.\d+)?s, answered 504$`),
	))
}

// TestAPIProxyReset: a reset connection is an error to the client, not an
// API error; the request asked again succeeds.
func TestAPIProxyReset(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	x := startProxied(t)
	c, err := client.New(x.cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	x.add(t, apiproxy.Rule{Verb: "create", Resource: "configmaps", Count: 1, Reset: true})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "r"}}
	err = c.Create(ctx, cm)
	g.Expect(err).To(HaveOccurred())
	g.Expect(apierrors.ReasonForError(err)).To(Equal(metav1.StatusReasonUnknown), "a connection error: %v", err)
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "r"}})).To(Succeed())
	g.Expect(x.whats()).To(Equal([]string{"reset the connection"}))
}

// TestAPIProxyProtobuf: clients that ask for protobuf list and watch
// through the proxy. One that also accepts JSON (client-go's default)
// gets JSON, so event rules apply to it; one that accepts only protobuf
// is passed through untouched, and the proxy says it could not apply.
func TestAPIProxyProtobuf(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	x := startProxied(t)
	g.Expect(env.Client.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "p"},
		Spec: corev1.PodSpec{ServiceAccountName: "operator", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	})).To(Succeed())
	for _, accept := range []string{"", "application/vnd.kubernetes.protobuf"} {
		cfg := rest.CopyConfig(x.cfg)
		cfg.ContentType, cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf", accept
		cs, err := kubernetes.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		pods, err := cs.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "Accept %q", accept)
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Name).To(Equal("p"))

		drop := x.add(t, apiproxy.Rule{Resource: "configmaps", Name: "dropped", Events: apiproxy.EventsDrop})
		w, err := cs.CoreV1().ConfigMaps(x.ns).Watch(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		putConfigMap(t, x.ns, "dropped", "v1")
		putConfigMap(t, x.ns, "seen", "v1")
		want := "ADDED seen"
		if accept != "" {
			want = "ADDED dropped"
		}
		var e watch.Event
		g.Eventually(w.ResultChan()).WithTimeout(proxyWait).Should(Receive(&e), "Accept %q", accept)
		g.Expect(describeEvent(e)).To(Equal(want), "the first event, Accept %q", accept)
		w.Stop()
		x.p.Remove(drop)
		g.Expect(env.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(x.ns))).To(Succeed())
	}
	g.Expect(x.whats()).To(Equal([]string{
		"dropped ADDED configmaps " + x.ns + "/dropped",
		"not applied: client accepts only protobuf",
	}))
}

// describeEvent is an event as "ADDED name".
func describeEvent(e watch.Event) string {
	if cm, ok := e.Object.(*corev1.ConfigMap); ok {
		return fmt.Sprint(e.Type, " ", cm.Name)
	}
	return fmt.Sprintf("%s %T", e.Type, e.Object)
}
