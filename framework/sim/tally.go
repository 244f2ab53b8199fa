package sim

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Tally adds up the notes (World.Note) of many runs: for each label, how
// many schedules noted it at least once and how many times in all. It is
// safe for RunSeeds' concurrent workers; the zero value is ready to use.
type Tally struct {
	mu        sync.Mutex
	runs      int
	schedules map[string]int
	times     map[string]int
}

// add counts one run's notes; a nil Tally counts nothing.
func (t *Tally) add(notes map[string]int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.schedules == nil {
		t.schedules, t.times = map[string]int{}, map[string]int{}
	}
	t.runs++
	for label, n := range notes {
		if n > 0 {
			t.schedules[label]++
			t.times[label] += n
		}
	}
}

// Runs is how many runs were counted.
func (t *Tally) Runs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs
}

// Schedules is how many runs noted label at least once.
func (t *Tally) Schedules(label string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.schedules[label]
}

// Times is how many times label was noted across all runs.
func (t *Tally) Times(label string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.times[label]
}

// String renders the tally one label a line, sorted by label.
func (t *Tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	labels := make([]string, 0, len(t.schedules))
	for l := range t.schedules {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	var b strings.Builder
	fmt.Fprintf(&b, "%d schedule(s):\n", t.runs)
	for _, l := range labels {
		fmt.Fprintf(&b, "  %-60s %5d schedule(s), %5d time(s)\n", l, t.schedules[l], t.times[l])
	}
	return b.String()
}
