package apiproxy

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// ev makes a queued event of object name ("" for a bookmark) held by rule.
func ev(typ, name, rv string, rule *armed, until time.Time) *held {
	return &held{ev: watchEvent{Type: typ}, meta: objMeta{Namespace: "db", Name: name, ResourceVersion: rv}, rule: rule, until: until}
}

func names(hs []*held) []string {
	var out []string
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s %s@%s", h.ev.Type, h.meta.Name, h.meta.ResourceVersion))
	}
	return out
}

func TestQueueHoldsInOrder(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Now()
	hold := &armed{Rule: Rule{Events: EventsDelay}}
	var q queue
	q.push(ev("ADDED", "a", "1", nil, time.Time{}))
	q.push(ev("MODIFIED", "a", "2", hold, time.Time{}))
	q.push(ev("ADDED", "b", "3", nil, time.Time{}))
	g.Expect(q.items[2].behind).To(BeTrue(), "b arrived behind a held event")
	out, next, _ := q.due(t0)
	g.Expect(names(out)).To(Equal([]string{"ADDED a@1"}), "what was not held goes; b waits behind the held event")
	g.Expect(next.IsZero()).To(BeTrue(), "held until the rule is removed")
	hold.removed.Store(true)
	out, _, _ = q.due(t0)
	g.Expect(names(out)).To(Equal([]string{"MODIFIED a@2", "ADDED b@3"}), "released in order")
	g.Expect(q.items).To(BeEmpty())
}

func TestQueueTimedDelay(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Now()
	delay := &armed{Rule: Rule{Events: EventsDelay, Delay: 2 * time.Second}}
	var q queue
	q.push(ev("MODIFIED", "a", "1", delay, t0.Add(2*time.Second)))
	q.push(ev("MODIFIED", "b", "2", nil, time.Time{}))
	q.push(ev("MODIFIED", "a", "3", delay, t0.Add(3*time.Second)))
	out, next, _ := q.due(t0.Add(time.Second))
	g.Expect(out).To(BeEmpty())
	g.Expect(next).To(Equal(t0.Add(2 * time.Second)))
	out, next, _ = q.due(t0.Add(2 * time.Second))
	g.Expect(names(out)).To(Equal([]string{"MODIFIED a@1", "MODIFIED b@2"}))
	g.Expect(next).To(Equal(t0.Add(3 * time.Second)))
	delay.removed.Store(true)
	out, _, _ = q.due(t0.Add(2 * time.Second))
	g.Expect(names(out)).To(Equal([]string{"MODIFIED a@3"}), "removing the rule lets the rest go at once")
}

func TestQueueCollapse(t *testing.T) {
	g := NewWithT(t)
	co := &armed{Rule: Rule{Events: EventsCoalesce}}
	other := &armed{Rule: Rule{Events: EventsDelay}}
	var q queue
	for _, h := range []*held{
		ev("MODIFIED", "a", "1", co, time.Time{}),
		ev("MODIFIED", "b", "2", co, time.Time{}),
		ev("BOOKMARK", "", "3", co, time.Time{}),
		ev("MODIFIED", "c", "4", nil, time.Time{}),
		ev("MODIFIED", "a", "5", co, time.Time{}),
		ev("MODIFIED", "d", "6", other, time.Time{}),
		ev("BOOKMARK", "", "7", co, time.Time{}),
		ev("DELETED", "b", "8", co, time.Time{}),
		ev("MODIFIED", "a", "9", co, time.Time{}),
		ev("BOOKMARK", "", "10", co, time.Time{}),
	} {
		q.push(h)
	}
	merged := q.collapse(co)
	g.Expect(names(q.items)).To(Equal([]string{
		"MODIFIED c@4", "MODIFIED d@6", "DELETED b@8", "MODIFIED a@9", "BOOKMARK @10",
	}), "the newest of each object where it stood, the last bookmark; others untouched")
	var got []string
	for _, m := range merged {
		got = append(got, fmt.Sprintf("%d→%s", m.n, m.last.meta.ResourceVersion))
	}
	g.Expect(got).To(Equal([]string{"2→8", "3→9"}))
	co.removed.Store(true)
	out, _, _ := q.due(time.Now())
	g.Expect(names(out)).To(Equal([]string{"MODIFIED c@4"}), "d is held by another rule, and the rest behind it")
	g.Expect(q.holding()).To(Equal(1))
}

// TestQueueCollapsesWhenDue: once a coalesce rule is removed, the first
// of its events to reach the head collapses them all, so no event of an
// object leaves before its newer ones are merged into it, whenever the
// writer wakes; one that arrives later collapses with what is left.
func TestQueueCollapsesWhenDue(t *testing.T) {
	g := NewWithT(t)
	co := &armed{Rule: Rule{Events: EventsCoalesce}}
	var q queue
	q.push(ev("MODIFIED", "a", "2", nil, time.Time{}))
	q.push(ev("MODIFIED", "a", "3", co, time.Time{}))
	q.push(ev("BOOKMARK", "", "4", co, time.Time{}))
	q.push(ev("MODIFIED", "a", "5", co, time.Time{}))
	g.Expect(q.holding()).To(Equal(2), "bookmarks are not counted")
	out, _, merged := q.due(time.Now())
	g.Expect(names(out)).To(Equal([]string{"MODIFIED a@2"}))
	g.Expect(merged).To(BeEmpty(), "nothing collapses while the rule holds")

	co.removed.Store(true)
	q.push(ev("MODIFIED", "a", "6", co, time.Time{})) // matched the rule just before its removal
	out, _, merged = q.due(time.Now())
	g.Expect(names(out)).To(Equal([]string{"BOOKMARK @4", "MODIFIED a@6"}))
	g.Expect(merged).To(HaveLen(1))
	g.Expect(merged[0].n).To(Equal(3))
	out, _, merged = q.due(time.Now())
	g.Expect(out).To(BeEmpty())
	g.Expect(merged).To(BeEmpty(), "collapsed once")
}

func TestTakesEvent(t *testing.T) {
	g := NewWithT(t)
	a := &armed{Rule: Rule{Events: EventsDrop, Name: "a", Labels: map[string]string{"app": "db"}}}
	g.Expect(a.takesEvent("MODIFIED", objMeta{Name: "a", Labels: map[string]string{"app": "db"}})).To(BeTrue())
	g.Expect(a.takesEvent("MODIFIED", objMeta{Name: "a"})).To(BeFalse(), "labels")
	g.Expect(a.takesEvent("MODIFIED", objMeta{Name: "b", Labels: map[string]string{"app": "db"}})).To(BeFalse(), "name")
	g.Expect(a.takesEvent("BOOKMARK", objMeta{})).To(BeFalse(), "drop lets bookmarks pass")
	g.Expect((&armed{Rule: Rule{Events: EventsCoalesce, Name: "a"}}).takesEvent("BOOKMARK", objMeta{})).To(BeTrue())
	g.Expect((&armed{Rule: Rule{Events: EventsDelay, Name: "a"}}).takesEvent("BOOKMARK", objMeta{})).To(BeFalse())
	g.Expect((&armed{Rule: Rule{Events: EventsDelay}}).takesEvent("BOOKMARK", objMeta{})).To(BeTrue())
}
