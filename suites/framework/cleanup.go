package framework

import (
	"context"
	"time"
)

// contextForCleanup bounds cleanup work that runs after a test's context ended.
func contextForCleanup() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = cancel // released when the timeout fires; cleanup calls are short
	return ctx
}
