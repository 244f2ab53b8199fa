//go:build gauntlet_bugs

package controller

import "sync"

var (
	bugsMu  sync.RWMutex
	enabled = map[Bug]bool{}
)

func bug(b Bug) bool {
	bugsMu.RLock()
	defer bugsMu.RUnlock()
	return enabled[b]
}

// BugsCompiledIn tells whether this binary can switch bugs on.
const BugsCompiledIn = true

// EnableBug switches a bug variant on until undo is called.
func EnableBug(b Bug) (undo func()) {
	bugsMu.Lock()
	defer bugsMu.Unlock()
	enabled[b] = true
	return func() {
		bugsMu.Lock()
		defer bugsMu.Unlock()
		delete(enabled, b)
	}
}
