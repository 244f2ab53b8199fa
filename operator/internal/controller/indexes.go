package controller

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
)

// PodsByCluster indexes member pods by the name of their DatabaseCluster. A
// cache answers a label selector by scanning every pod of the namespace: at
// a thousand clusters that scan was the manager's largest CPU cost (28 % of
// it in make bench-int N=1000 PROFILE=1), paid on every pass.
const PodsByCluster = "gauntlet.dev/databasecluster"

// FieldIndex is one field index the controller lists by.
type FieldIndex struct {
	Object  client.Object
	Field   string
	Extract client.IndexerFunc
}

// FieldIndexes are the indexes the controller lists by. SetupWithManager
// registers them with the manager's cache; a fake client that serves the
// controller needs them too, or its List fails.
func FieldIndexes() []FieldIndex {
	return []FieldIndex{{Object: &corev1.Pod{}, Field: PodsByCluster, Extract: podCluster}}
}

// podCluster is the cluster a member pod belongs to, by the labels its
// StatefulSet's selector matches.
func podCluster(o client.Object) []string {
	l := o.GetLabels()
	name, instance := l[builders.LabelName], l[builders.LabelInstance]
	if name != builders.SelectorLabelName || instance == "" {
		return nil
	}
	return []string{instance}
}

// indexed remembers the caches the indexes are registered with: controllers
// that share a manager (as tests run several) register them once.
var indexed sync.Map

func registerIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if _, done := indexed.LoadOrStore(indexer, true); done {
		return nil
	}
	for _, ix := range FieldIndexes() {
		if err := indexer.IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			indexed.Delete(indexer)
			return fmt.Errorf("indexing %T by %s: %w", ix.Object, ix.Field, err)
		}
	}
	return nil
}
