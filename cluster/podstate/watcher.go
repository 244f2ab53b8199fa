package podstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Watcher remembers since when it has seen each problem, over successive
// looks at the same pods, and says which have lasted: a problem gone from
// one look starts again from the next. Admission refusals are stuck at
// once, since a refused pod is never created, and so is a crash loop that
// has restarted CrashesAfterStart times.
type Watcher struct {
	// After is how long a problem must last (StuckAfter when zero).
	After time.Duration
	// Now is the clock (time.Now when nil).
	Now   func() time.Time
	first map[string]time.Time
}

// Stuck looks at the pods and their namespace's events once and returns
// the problems that have lasted, with how long each has been seen.
func (w *Watcher) Stuck(pods []corev1.Pod, events []corev1.Event) []Lasting {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	after := w.After
	if after == 0 {
		after = StuckAfter
	}
	t := now()
	seen := map[string]time.Time{}
	var found []Problem
	for i := range pods {
		if p := Of(&pods[i]); p != nil {
			found = append(found, *p)
		}
	}
	found = append(found, FromEvents(events, pods)...)
	var out []Lasting
	for _, p := range found {
		since, ok := w.first[p.Key()]
		if !ok {
			since = t
		}
		seen[p.Key()] = since
		if lasted := t.Sub(since); lasted >= after || p.Reason == "FailedCreate" || crashedAgain(p) {
			out = append(out, Lasting{Problem: p, For: lasted})
		}
	}
	w.first = seen
	return out
}

// CrashesAfterStart is how many restarts make a crash loop stuck at
// once: a container that crashed once at start (a webhook certificate not
// yet mounted) restarts and runs; one that crashed again will not.
const CrashesAfterStart = 2

// crashedAgain says whether the problem is a crash loop that has already
// restarted CrashesAfterStart times.
func crashedAgain(p Problem) bool {
	return p.Reason == "CrashLoopBackOff" && p.Restarts >= CrashesAfterStart
}

// Lasting is a problem and how long it has been seen.
type Lasting struct {
	Problem
	For time.Duration
}
