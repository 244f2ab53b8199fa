package space

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Plan draws the campaign: every step alone (a map's keys then replaced),
// so that each value is tried once, in rounds over the fields (byField), and up to sequences sequences, in an order the seed fixes. A third
// of the sequences are a step and its undo (UndoOf, against base, the
// starting resource), which the differential oracle judges as "undoing a
// change restores the earlier state"; the others are 2 to maxLen steps on
// different fields. The sequences are spread evenly among the single
// steps rather than after them all: a campaign whose budget ends early has
// still run some, and the faults they are held under.
func Plan(steps []Step, seed uint64, sequences, maxLen int, base map[string]any) [][]Step {
	rng := rand.New(rand.NewPCG(seed, 26))
	singles := byField(rng, steps)
	if maxLen < 2 || len(steps) == 0 {
		return singles
	}
	return interleave(singles, sequencesOf(rng, steps, sequences, maxLen, base))
}

// byField orders the steps as single-step sequences in rounds
// (InRounds). A step that sets a map's keys is followed by one that
// replaces them (Replacing): the keys an operator copied and never
// removes show only then.
func byField(rng *rand.Rand, steps []Step) [][]Step {
	singles := make([][]Step, 0, len(steps))
	for _, s := range inRounds(rng, steps, true) {
		seq := []Step{s}
		if r, ok := Replacing(s); ok {
			seq = append(seq, r)
		}
		singles = append(singles, seq)
	}
	return singles
}

// InRounds orders steps in rounds: the fields in a fair order (fairOrder,
// seeded), each giving one of its values per round (its values too in a
// seeded order), so that a campaign cut short has changed as many fields
// as it could, in every section of the spec, rather than tried many
// values of a few (an enum's members, an integer's bounds) or many fields
// of one section.
func InRounds(steps []Step, seed uint64) []Step {
	return inRounds(rand.New(rand.NewPCG(seed, 29)), steps, false)
}

// inRounds orders steps as InRounds does; with primaryFirst, a field's
// Primary value takes its first round (the plan's single values: the
// one a field is asked for most, where a campaign cut short tries one).
func inRounds(rng *rand.Rand, steps []Step, primaryFirst bool) []Step {
	var fields [][]string
	values := map[string][]Step{}
	for _, i := range rng.Perm(len(steps)) {
		f := steps[i].Field()
		if _, ok := values[f]; !ok {
			fields = append(fields, steps[i].fieldPath())
		}
		values[f] = append(values[f], steps[i])
	}
	if primaryFirst {
		for _, vs := range values {
			slices.SortStableFunc(vs, func(a, b Step) int { return boolOrder(b.Primary) - boolOrder(a.Primary) })
		}
	}
	fields = fairOrder(fields)
	out := make([]Step, 0, len(steps))
	for round := 0; len(out) < len(steps); round++ {
		for _, path := range fields {
			if vs := values[strings.Join(path, ".")]; round < len(vs) {
				out = append(out, vs[round])
			}
		}
	}
	return out
}

// fairOrder orders fields, given in a seeded order, so that every section
// of the spec gets its turn at every level: a round over spec's
// children, each child's fields in the same fair order within it. A
// section of seventy fields (a pod template the operator passes through)
// then takes no more of a short campaign's first runs than a field of
// the operator's own at the top; the seeded order decides who goes first
// among siblings.
func fairOrder(fields [][]string) [][]string {
	root := &fieldTree{}
	for _, f := range fields {
		root.add(f, f)
	}
	return root.order()
}

// fieldTree is fields by their path, children in the order first seen.
type fieldTree struct {
	field []string // the field that ends here, if any
	names []string
	kids  map[string]*fieldTree
}

func (t *fieldTree) add(rest, field []string) {
	if len(rest) == 0 {
		t.field = field
		return
	}
	if t.kids == nil {
		t.kids = map[string]*fieldTree{}
	}
	k, ok := t.kids[rest[0]]
	if !ok {
		k = &fieldTree{}
		t.kids[rest[0]] = k
		t.names = append(t.names, rest[0])
	}
	k.add(rest[1:], field)
}

// order is the field here, if any, and each child's fields, one from each
// in turn.
func (t *fieldTree) order() [][]string {
	var lists [][][]string
	if t.field != nil {
		lists = append(lists, [][]string{t.field})
	}
	for _, n := range t.names {
		lists = append(lists, t.kids[n].order())
	}
	var out [][]string
	for i := 0; ; i++ {
		took := false
		for _, l := range lists {
			if i < len(l) {
				out, took = append(out, l[i]), true
			}
		}
		if !took {
			return out
		}
	}
}

// interleave puts one of seqs after every len(singles)/len(seqs) singles
// (rounded up), the rest at the end.
func interleave(singles, seqs [][]Step) [][]Step {
	if len(seqs) == 0 {
		return singles
	}
	every := (len(singles) + len(seqs) - 1) / len(seqs)
	plan := make([][]Step, 0, len(singles)+len(seqs))
	for i, s := range singles {
		plan = append(plan, s)
		if (i+1)%every == 0 && len(seqs) > 0 {
			plan, seqs = append(plan, seqs[0]), seqs[1:]
		}
	}
	return append(plan, seqs...)
}

// sequencesOf draws up to n sequences of two steps or more, none twice.
func sequencesOf(rng *rand.Rand, steps []Step, n, maxLen int, base map[string]any) [][]Step {
	fields := map[string]bool{}
	for _, s := range steps {
		fields[s.Field()] = true
	}
	var plan [][]Step
	seen := map[string]bool{}
	for tries := 0; len(plan) < n && tries < 50*n; tries++ {
		var seq []Step
		if rng.IntN(3) == 0 || len(fields) < 2 {
			s := steps[rng.IntN(len(steps))]
			if undo, ok := UndoOf(s, base); ok {
				seq = []Step{s, undo}
			}
		} else {
			seq = mixed(rng, steps, 2+rng.IntN(maxLen-1))
		}
		key := fmt.Sprint(seq)
		if len(seq) < 2 || seen[key] {
			continue
		}
		seen[key] = true
		plan = append(plan, seq)
	}
	return plan
}

// mixed is up to n steps on different fields.
func mixed(rng *rand.Rand, steps []Step, n int) []Step {
	var seq []Step
	used := map[string]bool{}
	for _, i := range rng.Perm(len(steps)) {
		if len(seq) == n {
			break
		}
		if !used[steps[i].Field()] {
			used[steps[i].Field()] = true
			seq = append(seq, steps[i])
		}
	}
	return seq
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}
