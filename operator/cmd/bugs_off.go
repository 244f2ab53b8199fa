//go:build !gauntlet_bugs

package main

import "flag"

// bindBugFlags registers nothing in a normal build: bug variants exist only
// in binaries built with the gauntlet_bugs tag.
func bindBugFlags(*flag.FlagSet) func() error { return func() error { return nil } }
