package integration

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAPIProxyCacheSeesEveryUpdate: a controller-runtime cache (protobuf
// for built-in types, watch-list for its initial lists) with informers on
// several kinds, through the proxy with no rule armed, sees every update,
// status included, as it would straight from the API server.
func TestAPIProxyCacheSeesEveryUpdate(t *testing.T) {
	g := NewWithT(t)
	x := startProxied(t)
	c, err := cache.New(x.cfg, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{x.ns: {}}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Pod{}} {
		_, err := c.GetInformer(t.Context(), o)
		g.Expect(err).NotTo(HaveOccurred())
	}
	inf, err := c.GetInformer(t.Context(), &appsv1.StatefulSet{})
	g.Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	seen := map[int32]bool{}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) { mu.Lock(); seen[o.(*appsv1.StatefulSet).Status.ReadyReplicas] = true; mu.Unlock() },
	})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(t.Context()) }()
	syncCtx, cancel := context.WithTimeout(t.Context(), proxyWait)
	defer cancel()
	g.Expect(c.WaitForCacheSync(syncCtx)).To(BeTrue(), "the cache syncs through the proxy")
	labels := map[string]string{"app": "a"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: "a"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
	}}
	g.Expect(env.Client.Create(t.Context(), sts)).To(Succeed())
	for i := range int32(4) {
		sts.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: i, ObservedGeneration: 1}
		g.Expect(env.Client.Status().Update(t.Context(), sts)).To(Succeed(), fmt.Sprint(i))
	}
	g.Eventually(func() map[int32]bool {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}).WithTimeout(proxyWait).Should(HaveKey(int32(3)), "the cache through the proxy sees the last status update")
}
