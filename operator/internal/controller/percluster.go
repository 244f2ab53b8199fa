package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// perCluster is what the reconciler remembers of each cluster between
// passes (announcedConditions, writtenStatuses, validatedSpecs), tied to
// the cluster's UID: a cluster deleted and created again under its name
// starts afresh. Passes of one cluster never overlap (controller-runtime
// reconciles a key once at a time); passes of different clusters do,
// hence the lock.
type perCluster[T any] struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]clusterEntry[T]
}

type clusterEntry[T any] struct {
	uid types.UID
	val T
}

func keyOf(c *dbv1.DatabaseCluster) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

// get is what is remembered of c (the same object, by UID).
func (p *perCluster[T]) get(c *dbv1.DatabaseCluster) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[keyOf(c)]
	if !ok || e.uid != c.UID {
		var zero T
		return zero, false
	}
	return e.val, true
}

// put remembers v for c.
func (p *perCluster[T]) put(c *dbv1.DatabaseCluster, v T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries == nil {
		p.entries = map[types.NamespacedName]clusterEntry[T]{}
	}
	p.entries[keyOf(c)] = clusterEntry[T]{uid: c.UID, val: v}
}

// forget drops a cluster that no longer exists.
func (p *perCluster[T]) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.entries, key)
}
