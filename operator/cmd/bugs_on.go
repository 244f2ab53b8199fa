//go:build gauntlet_bugs

package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/gauntlet-dev/gauntlet/operator"
)

// bindBugFlags registers --bug in binaries built with the gauntlet_bugs tag,
// so that the e2e and chaos tiers can run a deliberately buggy operator and
// show that they catch it. The returned function switches the named bugs on
// once the flags are parsed.
func bindBugFlags(fs *flag.FlagSet) func() error {
	var names string
	fs.StringVar(&names, "bug", "", fmt.Sprintf("Comma-separated bug variants to switch on (test builds only): %v.", operator.AllBugs))
	return func() error {
		for _, n := range strings.Split(names, ",") {
			if n == "" {
				continue
			}
			if !slices.Contains(operator.AllBugs, operator.Bug(n)) {
				return fmt.Errorf("--bug %q: unknown variant (known: %v)", n, operator.AllBugs)
			}
			operator.EnableBug(operator.Bug(n))
		}
		return nil
	}
}
