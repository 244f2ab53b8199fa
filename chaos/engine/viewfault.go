package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// viewExperiment makes a view fault: rules armed in the API proxy in front
// of the operator for the hold (or, for watch-close, streams ended at the
// injection; for kill-after-write, a kill of the operator right after its
// Nth matching write).
func (r *run) viewExperiment(ctx context.Context, f scenario.Fault) (*chaosmesh.Experiment, error) {
	h := r.e.view
	if h == nil {
		// Setup starts the proxy for every set with a view fault, and an
		// explore campaign asks for it: no file can get here.
		return nil, fmt.Errorf("internal error: a view fault (%s) without the API proxy in front of the operator", f.Action)
	}
	target, err := h.target(ctx)
	if err != nil {
		return nil, err
	}
	if f.StaleFrom == scenario.StaleFromDeleted && r.deletedRV == "" {
		return nil, fmt.Errorf("staleFrom %q: the recreate never saw the old object marked for deletion (it had no finalizer)", scenario.StaleFromDeleted)
	}
	rule := r.viewRule(f)
	if r.twin {
		// The fault-free twin: the same timeline, the proxy untouched.
		return &chaosmesh.Experiment{Targets: []chaosmesh.Pods{target}, Harness: &chaosmesh.HarnessFault{Name: r.s.Metadata.Name, Kind: "APIProxy/none (fault-free twin)",
			Inject: func(ctx context.Context) error { return nil }, Recover: func(context.Context) error { return nil }}}, nil
	}
	kill := &killAfter{}
	if f.Action == scenario.ActionKillAfterWrite {
		rule.Then = func(req apiproxy.Request) { kill.fire(r, req) }
	}
	var id apiproxy.RuleID
	return &chaosmesh.Experiment{
		Targets: []chaosmesh.Pods{target},
		Harness: &chaosmesh.HarnessFault{
			Name: r.s.Metadata.Name,
			Kind: "APIProxy/" + f.Action,
			Inject: func(ctx context.Context) error {
				if f.Action == scenario.ActionWatchClose {
					n := h.proxy.CloseWatches(rule, f.Expire)
					r.e.logf("%s: closed %d watch streams of the operator (%s)", r.s.Metadata.Name, n, rule.String())
					return nil
				}
				var err error
				if id, err = h.proxy.Add(rule); err != nil {
					return err
				}
				if f.Restart {
					// Onto the faulted view: the new process's first
					// lists and watches go through the armed rule.
					return h.kill(ctx)
				}
				return nil
			},
			Recover: func(context.Context) error {
				if f.Action == scenario.ActionWatchClose {
					return nil
				}
				h.proxy.Remove(id)
				if f.Action == scenario.ActionWatchDrop {
					// A stream that lost events ends, as a broken one
					// would, too old to resume: the informers re-list and
					// see the present, having missed what happened.
					n := h.proxy.CloseWatches(rule, true)
					r.e.logf("%s: at the heal, ended %d watch streams that lost events (410: re-list)", r.s.Metadata.Name, n)
				}
				return kill.check(f.After)
			},
		},
	}, nil
}

// viewRule is the proxy rule of a view fault: its request match, with the
// namespace defaulting to the scenario's, and its action.
func (r *run) viewRule(f scenario.Fault) apiproxy.Rule {
	var m scenario.RequestMatch
	if f.Requests != nil {
		m = *f.Requests
	}
	ns := m.Namespace
	switch ns {
	case "":
		ns = r.ns
	case "*":
		ns = ""
	}
	rule := apiproxy.Rule{Verb: m.Verb, Resource: m.Resource, Subresource: m.Subresource, Namespace: ns, Name: m.Name,
		Labels: m.Labels, Count: m.Count, Probability: m.Probability}
	switch f.Action {
	case scenario.ActionAPIError:
		rule.Status, rule.RetryAfter = f.Status, f.RetryAfter.Duration
	case scenario.ActionAPIReset:
		rule.Reset = true
	case scenario.ActionAPITimeout:
		rule.Timeout = true
	case scenario.ActionAPILatency:
		rule.Delay = f.Latency.Duration
	case scenario.ActionKillAfterWrite:
		rule.After = f.After
	case scenario.ActionStaleView:
		rule.Stale, rule.Lag = true, f.Lag.Duration
		switch f.StaleFrom {
		case scenario.StaleFromCreated:
			rule.AtResourceVersion = r.createdRV
		case scenario.StaleFromDeleted:
			rule.AtResourceVersion = r.deletedRV
		}
	case scenario.ActionWatchDelay:
		rule.Events, rule.Delay = apiproxy.EventsDelay, f.Latency.Duration
	case scenario.ActionWatchDrop:
		rule.Events = apiproxy.EventsDrop
	case scenario.ActionWatchCoalesce:
		rule.Events = apiproxy.EventsCoalesce
	}
	if rule.Events != "" || f.Action == scenario.ActionWatchClose {
		rule.Verb = "watch"
	}
	return rule
}

// killAfter kills the operator once, from the proxy's after-write hook.
type killAfter struct {
	mu    sync.Mutex
	fired bool
	err   error
}

func (k *killAfter) fire(r *run, req apiproxy.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fired = true
	start := time.Now()
	k.err = r.e.view.kill(context.Background())
	r.e.logf("%s: killed the operator right after its write %s (in %s)", r.s.Metadata.Name, req.Info, time.Since(start).Round(time.Millisecond))
}

// check says whether the kill happened: a scenario whose fault never
// fired proves nothing.
func (k *killAfter) check(after int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	if after > 0 && !k.fired {
		return fmt.Errorf("the operator made fewer than %d matching writes during the hold: %s (widen the match or lengthen the hold)", after, report.KillNeverHappened)
	}
	return nil
}

// viewAccess is the API proxy in front of the operator, and how to kill
// the operator and name it as a fault's target.
type viewAccess struct {
	proxy  *apiproxy.Proxy
	kill   func(ctx context.Context) error
	target func(ctx context.Context) (chaosmesh.Pods, error)
}

// still ends a campaign run's hold (Trial.Still) once the operator has
// asked the API proxy nothing for the campaign's stillness window since
// the run's actions ended: a fault it no longer meets changes nothing by
// holding on. Outside a campaign, or with no proxy, holds are whole.
func (r *run) still() func(since time.Time) bool {
	window := r.e.stillHolds
	if window == 0 || r.e.view == nil {
		return nil
	}
	proxy := r.e.view.proxy
	return func(since time.Time) bool {
		last := proxy.LastAnswered()
		if last.Before(since) {
			last = since
		}
		return time.Since(last) >= window
	}
}
