package report

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// KillNeverHappened ends the error of a kill-after-write that found no
// write to follow: the run judges nothing.
const KillNeverHappened = "the kill never happened"

// Broken is an oracle a run broke: its name ("<kind>: <check>", or
// settles, runs, failed), what it saw, and where (Cause.Where).
type Broken struct{ Oracle, What, Where string }

// brokenBy lists the oracles a run broke, in the order it judged them:
// each violated check, or, when none is, the one its errors name. It
// lists none, and says why, when the run passed or judges nothing (the
// API server refused a step, which is the schema at work; the fault never
// fired; only the deletion hung).
func brokenBy(res *Result) ([]Broken, string) {
	if res.Verdict() == Passed {
		return nil, "passed"
	}
	var errs []string
	if res.Run != nil {
		errs = res.Errors
	}
	for _, msg := range errs {
		switch {
		case strings.Contains(msg, "the API server refused"):
			return nil, "refused by the API server: " + msg
		case strings.Contains(msg, KillNeverHappened):
			// The step made no write the fault waits for: nothing held.
			return nil, "not judged, the fault never fired: " + msg
		}
	}
	if res.Run != nil && res.Unpullable != "" {
		// No operator makes an image exist: a spec that names one the
		// nodes cannot get (or a default image this cluster has not)
		// says nothing of the operator.
		return nil, "not judged, an image cannot be pulled: " + res.Unpullable
	}
	if len(res.Checks) > 0 && len(res.Violations) == 0 && len(errs) > 0 && strings.HasPrefix(errs[0], "cleanup: ") {
		// Judged and passed; only its deletion hung (an environment
		// that cannot run what the deletion needs).
		return nil, "passed, but not deleted: " + errs[0]
	}
	var out []Broken
	for _, c := range res.Checks {
		if !c.OK() {
			out = append(out, Broken{Oracle: c.Kind + ": " + c.Name, What: c.Violation, Where: placeOf(res, c)})
		}
	}
	if len(out) > 0 {
		return out, out[0].What
	}
	for _, msg := range errs {
		if strings.Contains(msg, "converge") {
			return []Broken{{Oracle: "settles", What: msg}}, msg
		}
	}
	if len(errs) > 0 {
		return []Broken{{Oracle: "runs", What: errs[0]}}, errs[0]
	}
	what := strings.Join(res.Violations, "; ")
	return []Broken{{Oracle: "failed", What: what}}, what
}

// placeOf is where a run broke a check: the place the check names (the
// function the operator panicked in, the object it deleted), else the
// first place its end state differed from the fresh resource's or the
// fault-free twin's; "" when neither names one.
func placeOf(res *Result, c Check) string {
	if c.Where != "" {
		return c.Where
	}
	if res.Twin != nil && len(res.Twin.Differences) > 0 {
		return res.Twin.Differences[0].Path
	}
	return ""
}

// Judge is brokenBy with the refusal oracle, for the fields a run's
// steps set: a run that did not settle broke nothing when a condition
// names one of them (the operator refused the spec and said why).
func Judge(res *Result, fields []string) ([]Broken, string) {
	all, what := brokenBy(res)
	if len(all) == 1 && all[0].Oracle == "settles" {
		if cond := NamedInCondition(res.Conditions, fields); cond != "" {
			return nil, "refused by the operator, in its " + cond
		}
	}
	return all, what
}

// Oracle names the first oracle a run broke, as explore judges it, and
// says what it saw: "" when it passed, when the API server refused a
// step, or when it did not settle and a condition names one of fields,
// the fields its steps set (the operator refused the spec and said why).
// A replay of a finding's file is judged by it, as the campaign judged
// the run.
func Oracle(res *Result, fields []string) (oracle, what string) {
	all, what := Judge(res, fields)
	if len(all) == 0 {
		return "", what
	}
	return all[0].Oracle, all[0].What
}

// BrokenOracles names every oracle a run broke, in the order it judged them, as
// Oracle judges the first: a finding's oracle among them is the finding
// shown again, whatever else the run broke before it.
func BrokenOracles(res *Result, fields []string) []string {
	all, _ := Judge(res, fields)
	out := make([]string, len(all))
	for i, b := range all {
		out[i] = b.Oracle
	}
	return out
}

// NamedInCondition finds, among the conditions a run last read, one
// whose message names one of the fields a sequence set (spec.replicas): the
// operator refused the spec, and said why, which the refusal oracle
// allows. It returns "<type> condition (<status>): <message>", or "".
func NamedInCondition(conds []Condition, fields []string) string {
	for _, c := range conds {
		for _, f := range fields {
			if names(c.Message, f) {
				return fmt.Sprintf("%s condition (%s): %s", c.Type, c.Status, c.Message)
			}
		}
	}
	return ""
}

// names says whether a message names a field: its whole path, the end of
// it from some parent on (an API server's refusal of a child object names
// the child's own path: spec.trafficDistribution for
// spec.override.service.spec.trafficDistribution), or its last name alone
// when that cannot be a common word (camelCase, 10 letters or more:
// disableNonTLSListeners), as a word of its own, or the section of the
// spec it is in, in prose (namesSection).
func names(message, field string) bool {
	parts := strings.Split(field, ".")
	for i := 0; i+1 < len(parts); i++ {
		if strings.Contains(message, strings.Join(parts[i:], ".")) {
			return true
		}
	}
	if len(parts) > 2 && parts[0] == "spec" && namesSection(message, parts[1]) {
		return true
	}
	leaf := parts[len(parts)-1]
	if len(leaf) < 10 || strings.ToLower(leaf) == leaf {
		return false
	}
	for rest := message; ; {
		i := strings.Index(rest, leaf)
		if i < 0 {
			return false
		}
		before, after := rest[:i], rest[i+len(leaf):]
		if !endsInWordChar(before) && !startsWithWordChar(after) {
			return true
		}
		rest = after
	}
}

// sectionLetters is how long a section's name must be to be told in
// prose: shorter names (storage, replicas, image) are common words.
const sectionLetters = 9

// namesSection says whether a message tells of a spec section by a word
// that differs from the section's name in its last two letters at most
// ("shrinking persistent volumes is not supported" for
// spec.persistence), as operators word their refusals.
func namesSection(message, section string) bool {
	if len(section) < sectionLetters {
		return false
	}
	section = strings.ToLower(section)
	for _, w := range strings.FieldsFunc(strings.ToLower(message), func(r rune) bool { return !unicode.IsLetter(r) }) {
		n := 0
		for n < min(len(w), len(section)) && w[n] == section[n] {
			n++
		}
		if n >= len(section)-2 && n >= len(w)-2 {
			return true
		}
	}
	return false
}

func endsInWordChar(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
}

func startsWithWordChar(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
}
