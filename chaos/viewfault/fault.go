package viewfault

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

// Run is what a view fault needs of the run that holds it.
type Run struct {
	// Name is the scenario's, for the fault's name and its log lines.
	Name string
	// Namespace is the run's: a match with no namespace is in it.
	Namespace string
	// CreatedRV and DeletedRV are the resource's versions when it was
	// created and when its recreate saw it marked for deletion: where a
	// stale view starts from.
	CreatedRV, DeletedRV string
	// Twin says the run is the fault-free twin: the same timeline, the
	// proxy untouched.
	Twin bool
	Logf func(format string, args ...any)
}

// Experiment makes a view fault: its rule armed in the proxy for the hold
// (or, for watch-close, streams ended at the injection; for
// kill-after-write, a kill of the operator right after its Nth matching
// write).
func Experiment(ctx context.Context, a *Access, f scenario.Fault, r Run) (*chaosmesh.Experiment, error) {
	target, err := a.Target(ctx)
	if err != nil {
		return nil, err
	}
	if f.StaleFrom == scenario.StaleFromDeleted && r.DeletedRV == "" {
		return nil, fmt.Errorf("staleFrom %q: the recreate never saw the old object marked for deletion (it had no finalizer)", scenario.StaleFromDeleted)
	}
	rule := Rule(f, r)
	if r.Twin {
		return &chaosmesh.Experiment{Targets: []chaosmesh.Pods{target}, Harness: &chaosmesh.HarnessFault{Name: r.Name, Kind: "APIProxy/none (fault-free twin)",
			Inject: func(ctx context.Context) error { return nil }, Recover: func(context.Context) error { return nil }}}, nil
	}
	kill := &killAfter{}
	if f.Action == scenario.ActionKillAfterWrite {
		rule.Then = func(req apiproxy.Request) { kill.fire(a, r, req) }
	}
	var id apiproxy.RuleID
	return &chaosmesh.Experiment{
		Targets: []chaosmesh.Pods{target},
		Harness: &chaosmesh.HarnessFault{
			Name: r.Name,
			Kind: "APIProxy/" + f.Action,
			Inject: func(ctx context.Context) error {
				if f.Action == scenario.ActionWatchClose {
					n := a.Proxy.CloseWatches(rule, f.Expire)
					r.Logf("%s: closed %d watch streams of the operator (%s)", r.Name, n, rule.String())
					return nil
				}
				var err error
				if id, err = a.Proxy.Add(rule); err != nil {
					return err
				}
				if f.Restart {
					// Onto the faulted view: the new process's first
					// lists and watches go through the armed rule.
					return a.Kill(ctx)
				}
				return nil
			},
			Recover: func(context.Context) error {
				if f.Action == scenario.ActionWatchClose {
					return nil
				}
				a.Proxy.Remove(id)
				if f.Action == scenario.ActionWatchDrop {
					// A stream that lost events ends, as a broken one
					// would, too old to resume: the informers re-list and
					// see the present, having missed what happened.
					n := a.Proxy.CloseWatches(rule, true)
					r.Logf("%s: at the heal, ended %d watch streams that lost events (410: re-list)", r.Name, n)
				}
				return kill.check(f.After)
			},
		},
	}, nil
}

// Rule is the proxy rule of a view fault: its request match, with the
// namespace defaulting to the run's ("*": every namespace), and its
// action.
func Rule(f scenario.Fault, r Run) apiproxy.Rule {
	var m scenario.RequestMatch
	if f.Requests != nil {
		m = *f.Requests
	}
	ns := m.Namespace
	switch ns {
	case "":
		ns = r.Namespace
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
			rule.AtResourceVersion = r.CreatedRV
		case scenario.StaleFromDeleted:
			rule.AtResourceVersion = r.DeletedRV
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

func (k *killAfter) fire(a *Access, r Run, req apiproxy.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fired = true
	start := time.Now()
	k.err = a.Kill(context.Background())
	r.Logf("%s: killed the operator right after its write %s (in %s)", r.Name, req.Info, time.Since(start).Round(time.Millisecond))
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
