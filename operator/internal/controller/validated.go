package controller

import (
	"context"

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
	perCluster[validatedSpec]
}

type validatedSpec struct {
	generation int64
	errs       field.ErrorList
}

// of is validation.Cluster's answer for c, computed once per generation.
// A cluster without a generation (one built in a test, never stored) is
// validated every time.
func (v *validatedSpecs) of(ctx context.Context, c *dbv1.DatabaseCluster) field.ErrorList {
	if e, ok := v.get(c); ok && c.Generation != 0 && e.generation == c.Generation {
		return e.errs
	}
	errs := validation.Cluster(ctx, c)
	if c.Generation != 0 {
		v.put(c, validatedSpec{generation: c.Generation, errs: errs})
	}
	return errs
}
