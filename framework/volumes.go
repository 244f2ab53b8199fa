package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The class and provisioner of the volumes VolumeBinder makes.
const (
	SimulatedStorageClass = "gauntlet-simulated"
	SimulatedProvisioner  = "simulated.gauntlet.dev"
	// defaultClassAnnotation marks a cluster's default StorageClass.
	defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
	// volumeProtectionFinalizer is what the API server's
	// StorageObjectInUseProtection admission puts on every volume.
	volumeProtectionFinalizer = "kubernetes.io/pv-protection"
)

// VolumeBinder plays, for backends that run none (envtest), the
// PersistentVolume controller with a provisioner whose volumes can grow,
// and the resizer that grows them. Each Step:
//   - makes SimulatedStorageClass, expandable, the cluster's default when
//     it has none (the API server then gives it to every claim made with
//     no class, and the binder to claims made before, as Kubernetes 1.28+
//     does);
//   - binds each pending claim of a class whose provisioner is
//     SimulatedProvisioner to a volume made for it, of its requested size;
//   - brings a bound claim's capacity up to a larger request (the API
//     server refuses a smaller one, and a resize of an unbound claim);
//   - deletes the volumes whose claim is gone (reclaim policy Delete).
//
// Claims of other classes stay pending, as on a cluster with no
// provisioner for them.
type VolumeBinder struct {
	Client client.Client
	// classReady says the default class was found or made.
	classReady bool
}

// Step binds, grows and reclaims, and reports whether it changed anything.
func (v *VolumeBinder) Step(ctx context.Context) (bool, error) {
	changed, err := v.ensureClass(ctx)
	if err != nil {
		return changed, err
	}
	classes := &storagev1.StorageClassList{}
	if err := v.Client.List(ctx, classes); err != nil {
		return changed, fmt.Errorf("volume binder: listing StorageClasses: %w", err)
	}
	ours := map[string]bool{}
	for _, c := range classes.Items {
		ours[c.Name] = c.Provisioner == SimulatedProvisioner
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := v.Client.List(ctx, claims); err != nil {
		return changed, fmt.Errorf("volume binder: listing claims: %w", err)
	}
	var errs []error
	live := map[string]bool{}
	for i := range claims.Items {
		c := &claims.Items[i]
		live[string(c.UID)] = true
		did, err := v.claim(ctx, c, ours)
		changed = changed || did
		errs = append(errs, err)
	}
	did, err := v.reclaim(ctx, live)
	return changed || did, errors.Join(append(errs, err)...)
}

// ensureClass makes the default class once, unless one exists.
func (v *VolumeBinder) ensureClass(ctx context.Context) (bool, error) {
	if v.classReady {
		return false, nil
	}
	classes := &storagev1.StorageClassList{}
	if err := v.Client.List(ctx, classes); err != nil {
		return false, fmt.Errorf("volume binder: listing StorageClasses: %w", err)
	}
	for _, c := range classes.Items {
		if c.Annotations[defaultClassAnnotation] == "true" {
			v.classReady = true
			return false, nil
		}
	}
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: SimulatedStorageClass, Annotations: map[string]string{defaultClassAnnotation: "true"}},
		Provisioner:          SimulatedProvisioner,
		AllowVolumeExpansion: ptr.To(true),
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
	}
	if err := v.Client.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("volume binder: creating StorageClass %s: %w", class.Name, err)
	}
	v.classReady = true
	return true, nil
}

// claim gives a classless claim the default class, binds a pending claim
// of ours, or grows a bound one.
func (v *VolumeBinder) claim(ctx context.Context, c *corev1.PersistentVolumeClaim, ours map[string]bool) (bool, error) {
	if !c.DeletionTimestamp.IsZero() {
		return false, nil
	}
	want, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]
	switch {
	case !ok:
		return false, nil
	case c.Spec.StorageClassName == nil && c.Status.Phase != corev1.ClaimBound:
		// Retroactive default class assignment.
		c.Spec.StorageClassName = ptr.To(SimulatedStorageClass)
		if err := v.Client.Update(ctx, c); err != nil {
			return false, fmt.Errorf("volume binder: giving claim %s/%s the default class: %w", c.Namespace, c.Name, err)
		}
		return true, nil
	case !ours[ptr.Deref(c.Spec.StorageClassName, "")]:
		return false, nil
	case c.Status.Phase != corev1.ClaimBound:
		return true, v.bind(ctx, c, want)
	}
	if have := c.Status.Capacity[corev1.ResourceStorage]; have.Cmp(want) >= 0 {
		return false, nil
	}
	return true, v.grow(ctx, c, want)
}

// volumeName is the volume made for a claim, as the external
// provisioners name theirs.
func volumeName(c *corev1.PersistentVolumeClaim) string { return "pvc-" + string(c.UID) }

// bind makes the claim's volume and binds the two.
func (v *VolumeBinder) bind(ctx context.Context, c *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	modes := c.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: volumeName(c), Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": SimulatedProvisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   modes,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              ptr.Deref(c.Spec.StorageClassName, ""),
			VolumeMode:                    c.Spec.VolumeMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: SimulatedProvisioner, VolumeHandle: volumeName(c)},
			},
		},
	}
	if err := v.Client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("volume binder: creating volume %s: %w", pv.Name, err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if err := v.Client.Status().Update(ctx, pv); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("volume binder: marking volume %s bound: %w", pv.Name, err)
	}
	if c.Spec.VolumeName == "" {
		c.Spec.VolumeName = pv.Name
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
		c.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
		if err := v.Client.Update(ctx, c); err != nil {
			return fmt.Errorf("volume binder: binding claim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	c.Status.Phase = corev1.ClaimBound
	c.Status.AccessModes = modes
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	if err := v.Client.Status().Update(ctx, c); err != nil {
		return fmt.Errorf("volume binder: marking claim %s/%s bound: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// grow brings the claim's volume and capacity up to its request.
func (v *VolumeBinder) grow(ctx context.Context, c *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	pv := &corev1.PersistentVolume{}
	if err := v.Client.Get(ctx, client.ObjectKey{Name: c.Spec.VolumeName}, pv); err == nil {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
		if err := v.Client.Update(ctx, pv); err != nil {
			return fmt.Errorf("volume binder: growing volume %s: %w", pv.Name, err)
		}
	}
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	c.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: size}
	if err := v.Client.Status().Update(ctx, c); err != nil {
		return fmt.Errorf("volume binder: growing claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// reclaim deletes the volumes it made whose claim is gone.
func (v *VolumeBinder) reclaim(ctx context.Context, live map[string]bool) (bool, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := v.Client.List(ctx, pvs); err != nil {
		return false, fmt.Errorf("volume binder: listing volumes: %w", err)
	}
	changed := false
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != SimulatedProvisioner || pv.Spec.ClaimRef == nil || live[string(pv.Spec.ClaimRef.UID)] {
			continue
		}
		if pv.DeletionTimestamp.IsZero() {
			if err := v.Client.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
				return changed, fmt.Errorf("volume binder: deleting volume %s: %w", pv.Name, err)
			}
		}
		// The pv-protection controller's part: a volume no claim uses goes.
		if slices.Contains(pv.Finalizers, volumeProtectionFinalizer) {
			base := pv.DeepCopy()
			pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == volumeProtectionFinalizer })
			if err := v.Client.Patch(ctx, pv, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
				return changed, fmt.Errorf("volume binder: releasing volume %s: %w", pv.Name, err)
			}
		}
		changed = true
	}
	return changed, nil
}
