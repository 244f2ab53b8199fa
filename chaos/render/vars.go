package render

import (
	"os"
	"regexp"
)

var variableUse = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)

// Vars resolves ${NAME}: an override (--set) first, then the environment,
// then the file's default.
type Vars struct {
	Overrides map[string]string
	Defaults  map[string]string
}

// Value is the value of name, and whether any source had it.
func (v Vars) Value(name string) (string, bool) {
	if s, ok := v.Overrides[name]; ok {
		return s, true
	}
	if s, ok := os.LookupEnv(name); ok && s != "" {
		return s, true
	}
	s, ok := v.Defaults[name]
	return s, ok
}

// ExpandAll expands each of args (a command and its arguments).
func (v Vars) ExpandAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = v.Expand(a)
	}
	return out
}

// Expand replaces every ${NAME} in s; an unknown name is left as it is
// (the file check refuses those before a run).
func (v Vars) Expand(s string) string {
	return variableUse.ReplaceAllStringFunc(s, func(m string) string {
		if val, ok := v.Value(m[2 : len(m)-1]); ok {
			return val
		}
		return m
	})
}
