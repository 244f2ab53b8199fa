package unit

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

func TestForeignChildIsNeverAdoptedOrOverwritten(t *testing.T) {
	someoneElse := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "other", UID: "other-uid", Controller: ptr.To(true)}
	cases := []struct {
		name    string
		foreign client.Object
		kind    string
	}{
		{name: "unowned StatefulSet", kind: "StatefulSet", foreign: &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", Labels: map[string]string{"team": "other"}},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}}},
			},
		}},
		{name: "Service controlled by another owner", kind: "Service", foreign: &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-client", OwnerReferences: []metav1.OwnerReference{someoneElse}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			c := reference.NewCluster("default", "db").Build()
			w := reference.NewWorld(t, c, tc.foreign)
			before := tc.foreign.DeepCopyObject().(client.Object)
			g.Expect(w.Get(ctx, before)).To(Succeed())

			settle(t, w, c)

			g.Expect(c).To(framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionTrue, dbv1.ReasonForeignChild).
				WithMessageContaining(tc.kind, tc.foreign.GetName(), "neither adopt nor overwrite"))
			g.Expect(c).To(framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonBlocked))
			g.Expect(c.Status.ObservedGeneration).To(BeZero(), "a blocked pass is not a successful one")

			after := tc.foreign.DeepCopyObject().(client.Object)
			g.Expect(w.Get(ctx, after)).To(Succeed())
			// The simulated StatefulSet controller may write its status, as the
			// real one would; what the operator must not touch is everything else.
			g.Expect(after.GetOwnerReferences()).To(Equal(before.GetOwnerReferences()), "the foreign object was adopted")
			g.Expect(after.GetLabels()).To(Equal(before.GetLabels()))
			g.Expect(after.GetManagedFields()).NotTo(ContainElement(HaveField("Manager", operator.FieldOwner)))
			g.Expect(specOf(after)).To(Equal(specOf(before)))
			for _, wr := range w.Writes.All() {
				g.Expect(wr.Key.Name == tc.foreign.GetName() && wr.Kind == tc.kind).To(BeFalse(), "wrote %s", wr)
			}
			g.Expect(drainEvents(w)).To(ContainElement(ContainSubstring(dbv1.ReasonForeignChild)))
		})
	}
}

func specOf(obj client.Object) any {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		return o.Spec
	case *corev1.Service:
		return o.Spec
	default:
		panic("specOf: unexpected kind")
	}
}
