//go:build !gauntlet_bugs

package controller

// bug is always false outside the simulation tier's bug builds.
func bug(Bug) bool { return false }

// BugsCompiledIn tells whether this binary can switch bugs on.
const BugsCompiledIn = false

// EnableBug is a no-op outside the gauntlet_bugs build; it returns a no-op undo.
func EnableBug(Bug) (undo func()) { return func() {} }
