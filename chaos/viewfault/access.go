package viewfault

import (
	"context"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// Access is the API proxy in front of the operator, and how to kill the
// operator and name it as a fault's target.
type Access struct {
	Proxy  *apiproxy.Proxy
	Kill   func(ctx context.Context) error
	Target func(ctx context.Context) (chaosmesh.Pods, error)
}

// Still ends a hold (chaosmesh.Trial.Still) once the operator has asked
// the proxy nothing for window since the run's actions ended: a fault it
// no longer meets changes nothing by holding on. A zero window holds
// every fault whole (nil).
func (a *Access) Still(window time.Duration) func(since time.Time) bool {
	if window == 0 || a == nil {
		return nil
	}
	return func(since time.Time) bool {
		last := a.Proxy.LastAnswered()
		if last.Before(since) {
			last = since
		}
		return time.Since(last) >= window
	}
}
