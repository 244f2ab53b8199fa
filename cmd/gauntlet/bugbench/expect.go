package bugbench

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Expected reads, from the markdown tables of a document (docs/BENCHMARKS.md),
// the bugs a table marks found in the environment asked ("kind" or
// "envtest"): a table whose header has the columns "bug" and "verdict",
// rows whose verdict starts with "found". A table with an "on" column
// says where each row was found; a row found elsewhere is not expected
// (a variant found on kind, where envtest cannot run what it breaks). A
// table without one was found on envtest.
func Expected(path, env string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var found []string
	bugCol, verdictCol, onCol := -1, -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			bugCol, verdictCol, onCol = -1, -1, -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if bugCol < 0 {
			bugCol, verdictCol, onCol = slices.Index(cells, "bug"), slices.Index(cells, "verdict"), slices.Index(cells, "on")
			if verdictCol < 0 {
				bugCol = -1
			}
			continue
		}
		if max(bugCol, verdictCol, onCol) >= len(cells) || strings.HasPrefix(cells[bugCol], "---") {
			continue
		}
		on := "envtest"
		if onCol >= 0 {
			on = cells[onCol]
		}
		if strings.HasPrefix(cells[verdictCol], Found) && on == env {
			found = append(found, strings.Trim(cells[bugCol], "`"))
		}
	}
	return found, nil
}

// Regressions are the expected bugs of this run's that it did not find;
// bugs it did not run are not judged.
func (res *Result) Regressions(expected []string) []string {
	var out []string
	for _, r := range res.Bugs {
		if slices.Contains(expected, r.Bug.ID) && r.Verdict != Found {
			out = append(out, fmt.Sprintf("%s: %s %s", r.Bug.ID, r.Verdict, r.Why))
		}
	}
	return out
}
