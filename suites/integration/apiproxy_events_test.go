package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// proxyWait bounds every wait on something seen through the proxy.
const proxyWait = 30 * time.Second

// proxied is a proxy in front of the suite's API server, a namespace of
// its own, and an operator's configuration through the proxy.
type proxied struct {
	p   *apiproxy.Proxy
	ns  string
	cfg *rest.Config
}

func startProxied(t *testing.T) proxied {
	t.Helper()
	ns := newNamespace(t, "apiproxy-")
	p, err := apiproxy.Start(env.Config, 7)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Close() })
	return proxied{p: p, ns: ns, cfg: p.Config(operatorToken(t, ns))}
}

func (x proxied) add(t *testing.T, r apiproxy.Rule) apiproxy.RuleID {
	t.Helper()
	id, err := x.p.Add(r)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return id
}

// whats is what the proxy did, in order.
func (x proxied) whats() []string {
	var out []string
	for _, in := range x.p.Injected() {
		out = append(out, in.What)
	}
	return out
}

// putConfigMap creates the ConfigMap name with k=v, or sets k=v on it,
// straight on the API server (not through the proxy).
func putConfigMap(t *testing.T, ns, name, v string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": v}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":%q}}`, v))
	err := env.Client.Patch(t.Context(), cm, patch)
	if client.IgnoreNotFound(err) == nil && err != nil {
		err = env.Client.Create(t.Context(), cm)
	}
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// informed is a client-go shared informer on ConfigMaps through the
// proxy, as an operator runs one, logging what its handler sees.
type informed struct {
	inf cache.SharedIndexInformer
	ns  string
	mu  sync.Mutex
	log []string
}

func startInformer(t *testing.T, x proxied) *informed {
	t.Helper()
	g := NewWithT(t)
	cs, err := kubernetes.NewForConfig(x.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(x.ns))
	i := &informed{inf: factory.Core().V1().ConfigMaps().Informer(), ns: x.ns}
	_, err = i.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { i.note("add %s %s", o.(*corev1.ConfigMap).Name, o.(*corev1.ConfigMap).Data["k"]) },
		UpdateFunc: func(o, n any) {
			old, cm := o.(*corev1.ConfigMap), n.(*corev1.ConfigMap)
			if old.ResourceVersion != cm.ResourceVersion { // not a resync of the same object
				i.note("update %s %s→%s", cm.Name, old.Data["k"], cm.Data["k"])
			}
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	g.Expect(cache.WaitForCacheSync(t.Context().Done(), i.inf.HasSynced)).To(BeTrue())
	return i
}

func (i *informed) note(format string, args ...any) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.log = append(i.log, fmt.Sprintf(format, args...))
}

// events is what the handler saw, in order.
func (i *informed) events() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]string(nil), i.log...)
}

// value is k of the ConfigMap name as the informer's cache has it.
func (i *informed) value(name string) func() string {
	return func() string {
		o, ok, _ := i.inf.GetStore().GetByKey(i.ns + "/" + name)
		if !ok {
			return "(not in the cache)"
		}
		return o.(*corev1.ConfigMap).Data["k"]
	}
}

// TestAPIProxyDropUntilRelist: an informer whose watch loses an update
// never sees it, though the watch goes on; once its watch expires (410)
// it lists again and does.
func TestAPIProxyDropUntilRelist(t *testing.T) {
	g := NewWithT(t)
	x := startProxied(t)
	putConfigMap(t, x.ns, "a", "v1")
	inf := startInformer(t, x)
	g.Eventually(inf.value("a")).WithTimeout(proxyWait).Should(Equal("v1"))

	drop := x.add(t, apiproxy.Rule{Resource: "configmaps", Namespace: x.ns, Events: apiproxy.EventsDrop})
	putConfigMap(t, x.ns, "a", "v2")
	g.Eventually(x.whats).WithTimeout(proxyWait).Should(ContainElement("dropped MODIFIED configmaps "+x.ns+"/a"),
		"the update reached the proxy and was dropped")
	x.p.Remove(drop)
	g.Expect(inf.value("a")()).To(Equal("v1"), "the informer never saw the update")

	g.Expect(x.p.CloseWatches(apiproxy.Rule{Resource: "configmaps", Namespace: x.ns}, true)).To(Equal(1))
	g.Eventually(inf.value("a")).WithTimeout(proxyWait).Should(Equal("v2"), "a re-list after the 410")
	g.Expect(inf.events()).To(Equal([]string{"add a v1", "update a v1→v2"}))
	g.Expect(x.whats()).To(ContainElement("expired the watch (410 Expired)"))
}

// TestAPIProxyCoalesce: three updates while a coalesce rule is armed
// reach the informer as one, to the last value, once it is removed.
func TestAPIProxyCoalesce(t *testing.T) {
	g := NewWithT(t)
	x := startProxied(t)
	putConfigMap(t, x.ns, "a", "v1")
	inf := startInformer(t, x)
	g.Eventually(inf.value("a")).WithTimeout(proxyWait).Should(Equal("v1"))

	co := x.add(t, apiproxy.Rule{Resource: "configmaps", Namespace: x.ns, Events: apiproxy.EventsCoalesce})
	for _, v := range []string{"v2", "v3", "v4"} {
		putConfigMap(t, x.ns, "a", v)
	}
	g.Eventually(x.p.Held).WithTimeout(proxyWait).Should(BeNumerically(">=", 3), "the three updates are held")
	g.Expect(inf.events()).To(Equal([]string{"add a v1"}))
	x.p.Remove(co)
	g.Eventually(inf.events).WithTimeout(proxyWait).Should(Equal([]string{"add a v1", "update a v1→v4"}))
	g.Expect(x.whats()).To(ContainElement("coalesced 3 events of configmaps " + x.ns + "/a into MODIFIED"))
}

// TestAPIProxyHoldEvents: a delay rule without a Delay holds events until
// it is removed, then delivers them in the order they happened.
func TestAPIProxyHoldEvents(t *testing.T) {
	g := NewWithT(t)
	x := startProxied(t)
	putConfigMap(t, x.ns, "a", "v1")
	inf := startInformer(t, x)
	g.Eventually(inf.value("a")).WithTimeout(proxyWait).Should(Equal("v1"))

	hold := x.add(t, apiproxy.Rule{Resource: "configmaps", Namespace: x.ns, Events: apiproxy.EventsDelay})
	putConfigMap(t, x.ns, "b", "v1")
	putConfigMap(t, x.ns, "a", "v2")
	putConfigMap(t, x.ns, "b", "v2")
	g.Eventually(x.p.Held).WithTimeout(proxyWait).Should(BeNumerically(">=", 3))
	g.Expect(inf.events()).To(Equal([]string{"add a v1"}), "nothing delivered while held")
	x.p.Remove(hold)
	g.Eventually(inf.events).WithTimeout(proxyWait).Should(Equal([]string{
		"add a v1", "add b v1", "update a v1→v2", "update b v1→v2",
	}))
	g.Expect(x.whats()).To(ContainElement(MatchRegexp(`^delayed \S+ ADDED configmaps ` + x.ns + `/b$`)))
}
