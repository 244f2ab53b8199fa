package framework

import (
	"context"
	"testing"
	"time"
)

// cleanupContext bounds cleanup work that runs after a test's own context
// was cancelled: it keeps the test context's values, not its cancellation.
func cleanupContext(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
}
