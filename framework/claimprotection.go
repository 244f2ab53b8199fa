package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClaimProtectionFinalizer is what the API server's
// StorageObjectInUseProtection admission puts on every claim.
const ClaimProtectionFinalizer = "kubernetes.io/pvc-protection"

// ClaimProtection plays kube-controller-manager's pvc-protection
// controller for backends that run none (envtest): each Step releases the
// protection finalizer of a claim marked for deletion once no pod of its
// namespace mounts it, so that the claim goes as it would on a cluster
// (and a claim some pod still mounts stays, marked for deletion).
type ClaimProtection struct {
	Client client.Client
}

// Step releases the claims no pod uses and reports whether it released any.
func (cp *ClaimProtection) Step(ctx context.Context) (bool, error) {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := cp.Client.List(ctx, claims); err != nil {
		return false, fmt.Errorf("claim protection: listing claims: %w", err)
	}
	changed := false
	var errs []error
	pods := map[string]*corev1.PodList{}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.DeletionTimestamp.IsZero() || !slices.Contains(c.Finalizers, ClaimProtectionFinalizer) {
			continue
		}
		list, ok := pods[c.Namespace]
		if !ok {
			list = &corev1.PodList{}
			if err := cp.Client.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
				errs = append(errs, fmt.Errorf("claim protection: listing pods: %w", err))
				continue
			}
			pods[c.Namespace] = list
		}
		if mounted(list, c.Name) {
			continue
		}
		c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == ClaimProtectionFinalizer })
		if err := cp.Client.Update(ctx, c); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("claim protection: releasing %s: %w", c.Name, err))
			continue
		}
		changed = true
	}
	return changed, errors.Join(errs...)
}

// mounted says whether a pod that has not finished mounts the claim.
func mounted(pods *corev1.PodList, claim string) bool {
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return true
			}
		}
	}
	return false
}
