package space

import (
	"testing"
	"time"
)

// TestPatience: ten times the slowest, at least 30 s, at most the bound
// (the default when none is given).
func TestPatience(t *testing.T) {
	for _, c := range []struct {
		slowest, bound, want time.Duration
	}{
		{0, 2 * time.Minute, 30 * time.Second},
		{2 * time.Second, 2 * time.Minute, 30 * time.Second},
		{5 * time.Second, 2 * time.Minute, 50 * time.Second},
		{20 * time.Second, 2 * time.Minute, 2 * time.Minute},
		{20 * time.Second, 0, 3 * time.Minute},
		{time.Second, 10 * time.Second, 10 * time.Second},
	} {
		if got := Patience(c.slowest, c.bound, 3*time.Minute); got != c.want {
			t.Errorf("Patience(%s, %s, 3m) = %s, want %s", c.slowest, c.bound, got, c.want)
		}
	}
}
