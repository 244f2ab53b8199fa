package controller

// Bug names a deliberately wrong behaviour that the simulation tier must
// catch. Each is modelled on a class of operator bug from the Sieve (OSDI
// '22) and Acto (SOSP '23) studies. They exist only in binaries built with
// the gauntlet_bugs tag (the tests of the simulation tier); in every other
// build bug() is a constant false and the compiler drops the code.
type Bug string

// The bug variants.
const (
	// BugStatusBeforeChildWrite (intermediate state): status claims the
	// spec is reconciled before the StatefulSet is written; a crash in
	// between leaves a lie.
	BugStatusBeforeChildWrite Bug = "status-before-child-write"
	// BugFinalizerBeforeSnapshot (intermediate state): the finalizer goes
	// while the final snapshot is still in progress.
	BugFinalizerBeforeSnapshot Bug = "finalizer-before-snapshot"
	// BugImpatientRoll (quorum ignored): on an image change every member
	// pod is deleted at once instead of rolling one at a time.
	BugImpatientRoll Bug = "impatient-roll"
	// BugPDBWithoutOwner: the PodDisruptionBudget is written without an
	// owner reference, so it outlives the cluster.
	BugPDBWithoutOwner Bug = "pdb-without-owner"
	// BugHotLoop (two writers): every pass stamps the pod template with
	// the time, so the StatefulSet controller rolls pods forever.
	BugHotLoop Bug = "hot-loop"
	// BugStaleSpecOverwrite (stale state): the finalizer is added by
	// merge-patching the whole object as read, without a resourceVersion, so
	// a stale read writes an old spec back over the user's change.
	BugStaleSpecOverwrite Bug = "stale-spec-overwrite"
	// BugUnsafeScaleDown (quorum ignored): a scale-down removes the
	// highest member without checking that the others keep a quorum of
	// healthy voters, as when another member is unhealthy.
	BugUnsafeScaleDown Bug = "unsafe-scale-down"
)

// AllBugs lists every variant.
var AllBugs = []Bug{
	BugStatusBeforeChildWrite, BugFinalizerBeforeSnapshot, BugImpatientRoll,
	BugPDBWithoutOwner, BugHotLoop, BugStaleSpecOverwrite, BugUnsafeScaleDown,
}
