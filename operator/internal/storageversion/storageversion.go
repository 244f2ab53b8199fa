// Package storageversion moves a CustomResourceDefinition's stored objects
// to its current storage version, as kube-storage-version-migrator does:
// every object is written back unchanged (the API server re-encodes it in the
// storage version), and then status.storedVersions is trimmed to the storage
// version, so that an old version can later stop being served.
//
// The manager runs it once at start, leader-elected.
package storageversion

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=update;patch

// Migrator migrates the objects of one CRD.
type Migrator struct {
	// Client reads and writes directly, not through a cache.
	Client client.Client
	// CRD is the CustomResourceDefinition's name.
	CRD string
	// RetryInterval is how long Start waits after a failed attempt; 30 s
	// when zero.
	RetryInterval time.Duration
}

// Result says what Migrate did.
type Result struct {
	// Storage is the storage version.
	Storage string
	// Before is status.storedVersions as found.
	Before []string
	// Rewritten counts the objects written back.
	Rewritten int
}

// Migrate rewrites every object when the CRD's storedVersions lists more
// than its storage version, then trims storedVersions. It does nothing when
// only the storage version is listed.
func (m *Migrator) Migrate(ctx context.Context) (Result, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: m.CRD}, crd); err != nil {
		return Result{}, fmt.Errorf("reading CRD %s: %w", m.CRD, err)
	}
	var r Result
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			r.Storage = v.Name
		}
	}
	if r.Storage == "" {
		return r, fmt.Errorf("CRD %s has no storage version", m.CRD)
	}
	r.Before = slices.Clone(crd.Status.StoredVersions)
	if slices.Equal(r.Before, []string{r.Storage}) {
		return r, nil
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: r.Storage, Kind: crd.Spec.Names.ListKind}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk)
	if err := m.Client.List(ctx, list); err != nil {
		return r, fmt.Errorf("listing %s: %w", crd.Spec.Names.Plural, err)
	}
	for i := range list.Items {
		if err := m.rewrite(ctx, &list.Items[i]); err != nil {
			return r, err
		}
		r.Rewritten++
	}
	// Only now may the old versions go from storedVersions: every object
	// is stored in the storage version.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := m.Client.Get(ctx, client.ObjectKey{Name: m.CRD}, crd); err != nil {
			return err
		}
		crd.Status.StoredVersions = []string{r.Storage}
		return m.Client.Status().Update(ctx, crd)
	})
	if err != nil {
		return r, fmt.Errorf("trimming storedVersions of CRD %s to %s: %w", m.CRD, r.Storage, err)
	}
	return r, nil
}

// rewrite writes o back unchanged; on a conflict it reads it again, since
// someone else's write has re-encoded it anyway.
func (m *Migrator) rewrite(ctx context.Context, o *unstructured.Unstructured) error {
	err := m.Client.Update(ctx, o)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		fresh := o.DeepCopy()
		if err := m.Client.Get(ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		return m.rewrite(ctx, fresh)
	default:
		return fmt.Errorf("rewriting %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
}

// Start migrates once, retrying until it succeeds or ctx ends.
func (m *Migrator) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("storage-version")
	interval := m.RetryInterval
	if interval == 0 {
		interval = 30 * time.Second
	}
	// Until it succeeds; the context's end is no error of the migration.
	_ = wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		start := time.Now()
		r, err := m.Migrate(ctx)
		if err != nil {
			log.Error(err, "migrating stored objects; retrying", "crd", m.CRD, "retryIn", interval.String())
			return false, nil
		}
		if r.Rewritten > 0 || !slices.Equal(r.Before, []string{r.Storage}) {
			log.Info("migrated stored objects", "crd", m.CRD, "storageVersion", r.Storage, "storedVersionsBefore", r.Before, "rewritten", r.Rewritten, "took", time.Since(start).Round(time.Millisecond))
		}
		return true, nil
	})
	return nil
}

// NeedLeaderElection returns true: one replica migrates.
func (m *Migrator) NeedLeaderElection() bool { return true }
