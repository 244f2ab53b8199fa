package framework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestPollTellsItsObserver(t *testing.T) {
	g := NewWithT(t)
	var seen []string
	ctx := WithWaitObserver(t.Context(), func(what string, _ time.Time, done bool) {
		seen = append(seen, what+map[bool]string{false: " started", true: " ended"}[done])
	})
	n := 0
	err := PollFor(ctx, "three tries", time.Second, time.Millisecond, func(context.Context) (bool, string, error) {
		n++
		return n == 3, "try " + strings.Repeat("i", n), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(Equal([]string{"three tries started", "three tries ended"}))

	err = PollFor(t.Context(), "never", 20*time.Millisecond, time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "still no", nil
	})
	g.Expect(err).To(MatchError(ContainSubstring("waiting for never: gave up after")))
	g.Expect(err).To(MatchError(ContainSubstring("last observed:\nstill no")))
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue())
}

// A condition that ends the wait says why; the wait does not claim to
// have run out of time.
func TestPollStoppedByItsCondition(t *testing.T) {
	g := NewWithT(t)
	stuck := errors.New("the pod will not start")
	err := PollFor(t.Context(), "the pod", time.Second, time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "", stuck
	})
	g.Expect(err).To(MatchError(MatchRegexp(`^waiting for the pod: stopped after [0-9.]+[µnm]?s: the pod will not start$`)))
	g.Expect(errors.Is(err, stuck)).To(BeTrue())
}
