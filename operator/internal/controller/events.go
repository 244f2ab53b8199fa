package controller

import (
	"time"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// event records an events.k8s.io/v1 event about the cluster, if a recorder is set.
func (r *Reconciler) event(c *dbv1.DatabaseCluster, eventType, reason, action, note string, args ...any) {
	if r.Events == nil {
		return
	}
	r.Events.Eventf(c, nil, eventType, reason, action, note, args...)
}

// now is the reconciler's clock, injectable for deterministic simulations.
func (r *Reconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}
