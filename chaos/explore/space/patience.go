package space

import "time"

// A campaign's runs wait to converge, and for their resource to go,
// PatienceFactor times the slowest the campaign has seen so far (its
// reference run's first), at least PatienceFloor, at most the base
// scenario's own bounds. On envtest a step converges and a resource goes
// in seconds; one that never will would otherwise hold the whole bound
// (minutes) on every run and every shrinking try: on an operator that
// leaves many invalid values unrefused, or keeps its finalizer on some,
// most of a campaign's time. A finding's file keeps the base's bounds,
// so that its replays wait as the operator's own file says.
const (
	PatienceFactor = 10
	PatienceFloor  = 30 * time.Second
)

// Patience is PatienceFactor times slowest, at least PatienceFloor, at
// most bound (def when the base gives none).
func Patience(slowest, bound, def time.Duration) time.Duration {
	if bound <= 0 {
		bound = def
	}
	return min(bound, max(PatienceFloor, PatienceFactor*slowest))
}
