package compare

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework/endstate"
)

// endStateCheck names the twin oracle's end-state comparison.
const endStateCheck = "end state equals the fault-free twin's"

// Twin judges the faulted run against its fault-free twin: the
// resource's status, its children (missing, leaked, different) and the
// number of writes. Each difference is a check that fails.
func Twin(twin, faulted *State, noise Noise) ([]report.Check, *report.TwinDiff) {
	diff := &report.TwinDiff{TwinWrites: twin.Writes, FaultedWrites: faulted.Writes}
	var kept []report.Difference
	for _, d := range differences(twin, faulted) {
		if noise[generalize(d.Path)] {
			diff.Ignored = append(diff.Ignored, d.Path)
			continue
		}
		kept = append(kept, d)
	}
	kept, permuted := unpermuted(kept)
	kept, stamped := untimed(kept)
	diff.Differences, diff.Ignored = kept, append(append(diff.Ignored, permuted...), stamped...)
	state := report.Check{Kind: "twin", Name: endStateCheck, Value: "equal", Budget: "equal"}
	if n := len(diff.Differences); n > 0 {
		state.Value = fmt.Sprintf("%d differences", n)
		first := diff.Differences[0]
		state.Violation = fmt.Sprintf("the end state differs from the fault-free twin's in %d places, first %s: %s in the twin, %s after the fault", n, first.Path, first.Twin, first.Faulted)
	}
	// Faults cost retries; a run that writes far more than its twin is
	// fighting itself.
	limit := 3*twin.Writes + 50
	writes := report.Check{Kind: "twin", Name: "operator writes against the twin's", Value: fmt.Sprintf("%d (twin %d)", faulted.Writes, twin.Writes), Budget: fmt.Sprintf("≤ %d (3× the twin's + 50)", limit)}
	if faulted.Writes > limit {
		writes.Violation = fmt.Sprintf("the operator made %d writes, against %d in the fault-free twin", faulted.Writes, twin.Writes)
	}
	// An object deleted that the twin kept is the headline: what else
	// differs at the end is, most often, the operator rebuilding it.
	return []report.Check{compareDeletes(twin, faulted, noise), state, writes}, diff
}

// compareDeletes judges the operator's deletes against its twin's: each
// object deleted more often than the twin deleted it (an object of the
// same name deleted again is another object) is a finding, unless the
// two fault-free runs already deleted that resource differently. A fault
// may cost retries, never an object the twin kept: an operator acting on
// a stale view of a deleted resource deletes its successor's children.
func compareDeletes(twin, faulted *State, noise Noise) report.Check {
	check := report.Check{Kind: "twin", Name: "operator deletes only what the twin deletes",
		Value: fmt.Sprintf("%d (twin %d)", total(faulted.Deleted), total(twin.Deleted)), Budget: "none the twin does not"}
	var extra []string
	for _, key := range slices.Sorted(maps.Keys(faulted.Deleted)) {
		if n, in := faulted.Deleted[key], twin.Deleted[key]; n > in && !noise[deleteNoise(key)] {
			extra = append(extra, fmt.Sprintf("%s (%s, %s in the twin)", key, times(n), times(in)))
			if check.Where == "" {
				check.Where = key // the place a finding of it is counted by
			}
		}
	}
	if len(extra) > 0 {
		check.Violation = "the operator deleted what the fault-free twin did not: " + strings.Join(extra, ", ")
	}
	return check
}

// deleteNoise is the noise key of a deleted object's resource.
func deleteNoise(key string) string {
	resource, _, _ := strings.Cut(key, "/")
	return "deletes of " + resource
}

func times(n int) string {
	switch n {
	case 0:
		return "never"
	case 1:
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// differences lists where end state b differs from a: the status path by
// path, the children a has and b lacks (missing), those only b has
// (leaked), and each child's fields.
func differences(a, b *State) []report.Difference {
	diffs := endstate.Values("status", a.Status, b.Status)
	diffs = append(diffs, endstate.Objects(a.Children, b.Children)...)
	out := make([]report.Difference, len(diffs))
	for i, d := range diffs {
		out[i] = report.Difference{Path: d.Path, Twin: d.A, Faulted: d.B}
	}
	return out
}

// Fresh judges the scenario's end state against a fresh
// resource's with the same spec; writes differ by nature (the scenario
// took more steps) and are not judged.
func Fresh(fresh, got *State, noise Noise) (report.Check, *report.TwinDiff) {
	checks, diff := Twin(fresh, got, noise)
	diff.Against = "fresh"
	// The generation counts the spec's changes, so a resource that took
	// more steps observes a higher one.
	var kept []report.Difference
	for _, d := range diff.Differences {
		if generationOnly(d.Path) {
			diff.Ignored = append(diff.Ignored, d.Path)
			continue
		}
		kept = append(kept, d)
	}
	diff.Differences = kept
	check := checks[slices.IndexFunc(checks, func(c report.Check) bool { return c.Name == endStateCheck })]
	check.Kind, check.Name = "differential", "end state equals a fresh resource's with the same spec"
	check.Value, check.Violation = "equal", ""
	if n := len(diff.Differences); n > 0 {
		check.Value = fmt.Sprintf("%d differences", n)
		first := diff.Differences[0]
		check.Violation = fmt.Sprintf("the end state differs from a fresh resource's with the same spec in %d places, first %s: %s fresh, %s here", n, first.Path, first.Twin, first.Faulted)
	}
	return check, diff
}

// Noise is what differed between two fault-free runs (paths with list
// indexes written [*], and "deletes of <resource>"): never a finding.
type Noise map[string]bool

// Learn adds what differs between two fault-free end states to the noise
// and returns what it learned, sorted.
func (n Noise) Learn(a, b *State) []string {
	var learned []string
	for _, d := range differences(a, b) {
		g := generalize(d.Path)
		if !n[g] {
			n[g] = true
			learned = append(learned, g)
		}
	}
	deleted := map[string]int{}
	maps.Copy(deleted, a.Deleted)
	maps.Copy(deleted, b.Deleted)
	for _, key := range slices.Sorted(maps.Keys(deleted)) {
		if g := deleteNoise(key); a.Deleted[key] != b.Deleted[key] && !n[g] {
			n[g] = true
			learned = append(learned, g)
		}
	}
	slices.Sort(learned)
	return learned
}

// generationOnly says whether a difference is an observed generation,
// which counts the spec's changes rather than says what they did.
func generationOnly(path string) bool { return strings.HasSuffix(path, ".observedGeneration") }

var listIndex = regexp.MustCompile(`\[\d+\]`)

// unpermuted sets aside the differences that only move values between
// the items of a list: status.members[0].leader true in the twin and
// status.members[1].leader true after the fault is the same cluster with
// another leader, whoever the two fault-free twins happened to elect.
// Per field of a list's items, when the twin's values at the differing
// items are the faulted run's in another order, none is a finding. The
// same holds for whole items: a Service's ports built from a map come in
// any order, and an item gone at one index and there at another is the
// same list in another order (Kubernetes keys such lists; their order
// says nothing).
func unpermuted(diffs []report.Difference) (kept []report.Difference, permuted []string) {
	groups := map[string][]report.Difference{}
	for _, d := range diffs {
		if g := generalize(d.Path); strings.Contains(g, "[*].") || strings.HasSuffix(g, "[*]") {
			groups[g] = append(groups[g], d)
		}
	}
	moved := map[string]bool{}
	for _, g := range groups {
		var a, b []string
		for _, d := range g {
			a, b = append(a, d.Twin), append(b, d.Faulted)
		}
		slices.Sort(a)
		slices.Sort(b)
		if len(g) > 1 && slices.Equal(a, b) {
			for _, d := range g {
				moved[d.Path] = true
			}
		}
	}
	for _, d := range diffs {
		if moved[d.Path] {
			permuted = append(permuted, d.Path+" (held by another item)")
			continue
		}
		kept = append(kept, d)
	}
	return kept, permuted
}

// untimed sets aside the differences between two timestamps: an
// annotation that records when the operator last restarted or
// reconfigured something (2026-11-28T04:05:06Z) holds another instant in
// every run. Whether such a stamp is there at all is still compared.
func untimed(diffs []report.Difference) (kept []report.Difference, stamped []string) {
	for _, d := range diffs {
		if isTimestamp(d.Twin) && isTimestamp(d.Faulted) {
			stamped = append(stamped, d.Path+" (another instant)")
			continue
		}
		kept = append(kept, d)
	}
	return kept, stamped
}

// isTimestamp says whether a value, as a difference shows it, is a
// quoted RFC 3339 instant.
func isTimestamp(shown string) bool {
	s, err := strconv.Unquote(shown)
	if err != nil {
		return false
	}
	_, err = time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// generalize writes a path's list indexes as [*]: a member's ID differs
// between runs whichever member it is.
func generalize(path string) string { return listIndex.ReplaceAllString(path, "[*]") }
