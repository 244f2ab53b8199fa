package memcached

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The Deployment's container is the same whatever Deployment it is
// written over: the pull policy too, which the API server would otherwise
// default from the first image's tag only (gauntlet explore found a
// Deployment whose image had changed keep the old image's policy).
func TestMutateDeploymentContainer(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(appsv1.AddToScheme(scheme)).To(Succeed())
	g.Expect(AddToScheme(scheme)).To(Succeed())
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).Build()}
	m := &Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "u"}, Spec: MemcachedSpec{Size: 3, Image: "memcached"}}

	fresh := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}}
	g.Expect(r.mutateDeployment(m, fresh)).To(Succeed())
	older := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6", ImagePullPolicy: corev1.PullAlways}}}}}}
	g.Expect(r.mutateDeployment(m, older)).To(Succeed())

	for _, dep := range []*appsv1.Deployment{fresh, older} {
		c := dep.Spec.Template.Spec.Containers[0]
		g.Expect(c.Image).To(Equal("memcached"))
		g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
	}
}
