package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/validation"
)

// validatedSpecs remembers, per cluster, what validation.Cluster said of
// its spec at a generation. The CRD's schema and CEL rules run in-process
// (the API server's own validators), which costs about 2,000 allocations a
// pass: on a converged cluster, whose generation has not moved, every pass
// would pay it again for the same answer. The spec changes only with the
// generation, so the answer is kept until it does.
type validatedSpecs struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]validatedSpec
}

type validatedSpec struct {
	uid        types.UID
	generation int64
	errs       field.ErrorList
}

// of is validation.Cluster's answer for c, computed once per generation.
// A cluster without a generation (one built in a test, never stored) is
// validated every time.
func (v *validatedSpecs) of(ctx context.Context, c *dbv1.DatabaseCluster) field.ErrorList {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	v.mu.Lock()
	e, ok := v.entries[key]
	v.mu.Unlock()
	if ok && c.Generation != 0 && e.uid == c.UID && e.generation == c.Generation {
		return e.errs
	}
	errs := validation.Cluster(ctx, c)
	if c.Generation == 0 {
		return errs
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.entries == nil {
		v.entries = map[types.NamespacedName]validatedSpec{}
	}
	v.entries[key] = validatedSpec{uid: c.UID, generation: c.Generation, errs: errs}
	return errs
}

// forget drops a cluster that no longer exists.
func (v *validatedSpecs) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.entries, key)
}
