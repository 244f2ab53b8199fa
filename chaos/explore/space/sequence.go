package space

import "strings"

// Describe says what a sequence does, step after step.
func Describe(seq []Step) string { return strings.Join(Strings(seq), ", then ") }

// Strings are a sequence's steps as text.
func Strings(seq []Step) []string {
	var out []string
	for _, s := range seq {
		out = append(out, s.String())
	}
	return out
}

// FieldsOf are the fields a sequence's steps set, in order.
func FieldsOf(seq []Step) []string {
	var out []string
	for _, st := range seq {
		out = append(out, st.Field())
	}
	return out
}

// SetBy are the fields a sequence set, for the refusal oracle: each
// step's field and, where a step built its field's parent whole, that
// parent (a condition may name a sibling the step filled in).
func SetBy(seq []Step) []string {
	out := FieldsOf(seq)
	for _, st := range seq {
		if st.Leaf != nil {
			out = append(out, strings.Join(st.Path, "."))
		}
	}
	return out
}
