package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// TestVolumeBinder: on a real API server, the simulated binder gives
// claims the default class it makes (retroactively to one made before),
// binds them to volumes of their size, and grows a bound claim whose
// request the API server let grow; a shrink is the API server's to
// refuse, a claim of a class nobody provisions stays pending, and a
// claim's volume goes with it.
func TestVolumeBinder(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c := env.Client
	binder := &framework.VolumeBinder{Client: c}
	t.Cleanup(func() {
		// Claims made by later tests get no class of ours.
		_ = c.Delete(context.WithoutCancel(ctx), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: framework.SimulatedStorageClass}})
	})
	ns := newNamespace(t, "volumes")
	claim := func(name string, class *string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: class,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		g.Expect(c.Create(ctx, pvc)).To(Succeed())
		return pvc
	}
	get := func(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		out := &corev1.PersistentVolumeClaim{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pvc), out)).To(Succeed())
		return out
	}
	steps := func(n int) {
		for range n {
			_, err := binder.Step(ctx)
			g.Expect(err).NotTo(HaveOccurred())
		}
	}

	early := claim("early", nil) // before any default class
	steps(1)
	late := claim("late", nil)
	g.Expect(get(late).Spec.StorageClassName).To(Equal(ptr.To(framework.SimulatedStorageClass)), "the API server gives the default class")
	other := claim("other", ptr.To("nobody-provisions"))
	steps(2)

	for _, pvc := range []*corev1.PersistentVolumeClaim{early, late} {
		got := get(pvc)
		g.Expect(got.Spec.StorageClassName).To(Equal(ptr.To(framework.SimulatedStorageClass)), pvc.Name)
		g.Expect(got.Status.Phase).To(Equal(corev1.ClaimBound), pvc.Name)
		g.Expect(got.Status.Capacity.Storage().String()).To(Equal("1Gi"), pvc.Name)
		pv := &corev1.PersistentVolume{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: got.Spec.VolumeName}, pv)).To(Succeed(), pvc.Name)
		g.Expect(pv.Spec.ClaimRef.UID).To(Equal(got.UID))
		g.Expect(pv.Status.Phase).To(Equal(corev1.VolumeBound))
	}
	g.Expect(get(other).Status.Phase).NotTo(Equal(corev1.ClaimBound), "no provisioner for its class")

	grown := get(early)
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	g.Expect(c.Update(ctx, grown)).To(Succeed(), "a bound claim of an expandable class may grow")
	steps(1)
	g.Expect(get(early).Status.Capacity.Storage().String()).To(Equal("2Gi"))

	shrunk := get(early)
	shrunk.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	g.Expect(c.Update(ctx, shrunk)).NotTo(Succeed(), "the API server refuses a shrink")

	volume := get(late).Spec.VolumeName
	g.Expect(c.Delete(ctx, late)).To(Succeed())
	// envtest runs no pvc-protection controller: play it, then the binder.
	_, err := (&framework.ClaimProtection{Client: c}).Step(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	steps(1)
	g.Expect(c.Get(ctx, client.ObjectKey{Name: volume}, &corev1.PersistentVolume{})).To(MatchError(ContainSubstring("not found")), "its volume is reclaimed")
}
