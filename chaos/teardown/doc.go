// Package teardown watches a resource's deletion and judges what the
// operator did while it went: whether the children it controls went
// before it (the promise of a finalizer that guards cleanup), and whether
// the work it began for the deletion itself (a Job that takes a final
// snapshot, say) finished before the resource was let go.
//
// The judgements name no operator, kind or field of one: they read owner
// references and the run-to-completion states Kubernetes defines for
// batch Jobs.
package teardown
