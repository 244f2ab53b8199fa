package report

import (
	"regexp"
	"strings"
)

// Cause is findings that broke one oracle in one place: most likely one
// bug, seen from several steps.
type Cause struct {
	Oracle string `json:"oracle"`
	// Where is the place, with list indices dropped: the object and the
	// first two fields of the path where the end state first differed
	// (PersistentVolumeClaim/data-0.spec.resources), or, when the oracle
	// names no place, the spec field the shrunk steps set
	// (spec.persistence).
	Where string `json:"where"`
	// Findings are the findings' scenarios, in the order found.
	Findings []string `json:"findings"`
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// place is a finding's Where cut to its object and two fields, list
// indices dropped, or else the family of the field its first shrunk step
// set ("spec.config.x=1 (in a new spec.config)" → spec.config).
func place(f Finding) string {
	if f.Where != "" {
		obj, path, _ := strings.Cut(listIndex.ReplaceAllString(f.Where, "[]"), ".")
		if parts := strings.Split(path, "."); path != "" && len(parts) > 2 {
			path = strings.Join(parts[:2], ".")
		}
		if path == "" {
			return obj
		}
		return obj + "." + path
	}
	if len(f.Shrunk) == 0 {
		return "the starting resource"
	}
	field, _, _ := strings.Cut(f.Shrunk[0], "=")
	if parts := strings.Split(field, "."); len(parts) > 2 {
		field = strings.Join(parts[:2], ".")
	}
	return field
}

// SameCause says whether a run that broke an oracle, described as run
// (its oracle, the place its end state first differed if any, its steps
// and its fault's action), has f's cause: the same oracle in the same
// place, under no fault or f's own. With no place to compare, the place
// is the family of a field the run set that f's shrunk steps set too.
func SameCause(f, run Finding) bool {
	if f.Oracle != run.Oracle || (f.FaultAction != "" && f.FaultAction != run.FaultAction) {
		return false
	}
	if f.Where != "" || run.Where != "" {
		return f.Where != "" && run.Where != "" && place(f) == place(run)
	}
	want := place(f)
	for _, s := range run.Shrunk {
		if place(Finding{Shrunk: []string{s}}) == want {
			return true
		}
	}
	return false
}

// GroupFindings sorts the findings into causes: one per oracle and place,
// in the order their first finding was found.
func GroupFindings(findings []Finding) []Cause {
	var causes []Cause
	at := map[string]int{}
	for _, f := range findings {
		key := f.Oracle + "\x00" + place(f)
		i, ok := at[key]
		if !ok {
			i = len(causes)
			at[key] = i
			causes = append(causes, Cause{Oracle: f.Oracle, Where: place(f)})
		}
		causes[i].Findings = append(causes[i].Findings, f.Scenario)
	}
	return causes
}
