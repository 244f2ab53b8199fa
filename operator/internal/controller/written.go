package controller

import (
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// writtenStatuses remembers, per cluster, the status the operator last
// wrote. A pass reads the cluster from the informer's cache, which may not
// have seen the previous pass's status write yet. Taken for what the API
// server holds, such a stale status misleads the pass: when the status it
// computes equals the stale one it writes nothing, and when it writes, its
// patch is the difference from the stale one. On kind, a member killed and
// healthy again within a second left Degraded=True for the 60 s health
// recheck that way: the second pass computed Degraded=False, found it in
// the stale read, and wrote nothing. So a pass starts from the status last
// written, when one is known.
//
// The status is the operator's to write: one written by someone else is
// replaced at the operator's next change. A fresh reconciler starts from
// the status it reads.
type writtenStatuses struct {
	perCluster[*dbv1.DatabaseClusterStatus]
}

// last is the status last written for c (the same object, by UID), or nil.
func (w *writtenStatuses) last(c *dbv1.DatabaseCluster) *dbv1.DatabaseClusterStatus {
	st, _ := w.get(c)
	return st
}

// record remembers st as written for c.
func (w *writtenStatuses) record(c *dbv1.DatabaseCluster, st *dbv1.DatabaseClusterStatus) {
	w.put(c, st.DeepCopy())
}
