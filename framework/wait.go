package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Condition is polled by Poll: it reports whether it holds, and what it saw
// (printed if the wait times out). An error ends the wait at once.
type Condition func(ctx context.Context) (done bool, observed string, err error)

// WaitObserver learns of every wait made through Poll with its context:
// when it starts (done false) and when it ends (done true). A progress
// display uses it to say what a long step is waiting for.
type WaitObserver func(what string, started time.Time, done bool)

type waitObserverKey struct{}

// WithWaitObserver returns a context whose Polls report to obs.
func WithWaitObserver(ctx context.Context, obs WaitObserver) context.Context {
	return context.WithValue(ctx, waitObserverKey{}, obs)
}

// Poll waits until cond holds or ctx ends, checking every interval. On timeout
// the error names what it waited for and the last thing it saw.
func Poll(ctx context.Context, what string, interval time.Duration, cond Condition) error {
	last := "nothing observed yet"
	start := time.Now()
	if obs, ok := ctx.Value(waitObserverKey{}).(WaitObserver); ok {
		obs(what, start, false)
		defer obs(what, start, true)
	}
	var condErr error
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		done, observed, err := cond(ctx)
		if observed != "" && ctx.Err() == nil { // what fails because time ran out says nothing
			last = observed
		}
		condErr = err
		return done, err
	})
	if err != nil && condErr != nil && errors.Is(err, condErr) {
		// The condition ended the wait: it says why.
		return fmt.Errorf("waiting for %s: stopped after %s: %w", what, time.Since(start).Round(time.Millisecond), err)
	}
	if err != nil {
		return fmt.Errorf("waiting for %s: gave up after %s: %w; last observed:\n%s", what, time.Since(start).Round(time.Millisecond), err, last)
	}
	return nil
}

// PollFor is Poll with its own deadline.
func PollFor(ctx context.Context, what string, timeout, interval time.Duration, cond Condition) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return Poll(ctx, what, interval, cond)
}

// RunEvery runs step every interval until ctx ends, reporting errors to
// onErr; it drives simulators alongside a live manager.
func RunEvery(ctx context.Context, interval time.Duration, step EnvStep, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := step(ctx); err != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}
