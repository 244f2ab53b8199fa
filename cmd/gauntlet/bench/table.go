// Package bench keeps one table of every benchmark figure: the value, the
// goal it is held to and the machine it was measured on. `make bench` writes
// a table (Markdown for people, JSON for tools) and `gauntlet bench compare`
// diffs two of them, flagging regressions.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Better says which direction of a figure is an improvement.
type Better string

// The two directions.
const (
	LowerIsBetter  Better = "lower"
	HigherIsBetter Better = "higher"
)

// Goal bounds a figure: at most (LowerIsBetter) or at least (HigherIsBetter) Value.
type Goal struct {
	Value float64 `json:"value"`
	// Source says where the goal comes from, for example "issue 16".
	Source string `json:"source,omitempty"`
}

// Figure is one measured number.
type Figure struct {
	// Name identifies the figure across runs; comparison matches on it.
	Name   string  `json:"figure"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Better Better  `json:"better"`
	Goal   *Goal   `json:"goal,omitempty"`
	// Note qualifies how it was measured (for example "N=200").
	Note string `json:"note,omitempty"`
}

// Met tells whether the figure meets its goal; ok is false without a goal.
func (f Figure) Met() (met, ok bool) {
	if f.Goal == nil {
		return false, false
	}
	if f.Better == HigherIsBetter {
		return f.Value >= f.Goal.Value, true
	}
	return f.Value <= f.Goal.Value, true
}

// Machine says where the figures were measured.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	MemoryGB string `json:"memory"`
	Go       string `json:"go"`
	OS       string `json:"os"`
}

func (m Machine) String() string {
	return fmt.Sprintf("%s, %d cores, %s, %s, %s", m.CPU, m.Cores, m.MemoryGB, m.Go, m.OS)
}

// Table is every figure of one run.
type Table struct {
	Time   time.Time `json:"time"`
	Commit string    `json:"commit,omitempty"`
	// Note says anything a reader needs to weigh the figures (for example
	// what else ran on the machine).
	Note    string   `json:"note,omitempty"`
	Machine Machine  `json:"machine"`
	Figures []Figure `json:"figures"`
}

// JSONName and MarkdownName are the file names of a table in a run's folder.
const (
	JSONName     = "benchmarks.json"
	MarkdownName = "BENCHMARKS.md"
)

// WriteMarkdown renders the table: one row per figure with its value, its
// goal and whether the goal is met, and the machine.
func WriteMarkdown(w io.Writer, t Table) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Measured %s", t.Time.UTC().Format(time.RFC3339))
	if t.Commit != "" {
		fmt.Fprintf(&b, " at commit %s", t.Commit)
	}
	fmt.Fprintf(&b, " by `make bench`.\n\n")
	if t.Note != "" {
		fmt.Fprintf(&b, "%s\n\n", t.Note)
	}
	fmt.Fprintf(&b, "| figure | value | goal | machine |\n|---|---|---|---|\n")
	machine := escape(t.Machine.String())
	for _, f := range t.Figures {
		name := f.Name
		if f.Note != "" {
			name += " (" + f.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", escape(name), Format(f.Value, f.Unit), goalCell(f), machine)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func goalCell(f Figure) string {
	met, ok := f.Met()
	if !ok {
		return "—"
	}
	op := "≤"
	if f.Better == HigherIsBetter {
		op = "≥"
	}
	s := op + " " + Format(f.Goal.Value, f.Unit)
	if met {
		s += " (met)"
	} else {
		s += " (**not met**)"
	}
	if f.Goal.Source != "" {
		s += ", " + f.Goal.Source
	}
	return escape(s)
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Format prints a value with its unit and a sensible number of digits.
func Format(v float64, unit string) string {
	var num string
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		num = fmt.Sprint(v)
	case a == 0:
		num = "0"
	case a >= 100:
		num = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		num = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		num = strconv.FormatFloat(v, 'g', 3, 64)
	}
	if unit == "" {
		return num
	}
	return num + " " + unit
}

// WriteFiles writes the table as BENCHMARKS.md and benchmarks.json into dir.
func WriteFiles(dir string, t Table) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, JSONName), append(data, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, MarkdownName))
	if err != nil {
		return err
	}
	if err := WriteMarkdown(f, t); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ReadTable reads a table from its JSON file, from a folder holding one, or
// from the BENCHMARKS.md it sits beside.
func ReadTable(path string) (Table, error) {
	var t Table
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, JSONName)
	} else if strings.HasSuffix(path, ".md") {
		path = filepath.Join(filepath.Dir(path), JSONName)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return t, fmt.Errorf("reading a benchmark table: %w", err)
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return t, fmt.Errorf("reading the benchmark table %s: %w", path, err)
	}
	return t, nil
}

// ReadFigures reads a JSON list of figures (as the envtest scale benchmark writes).
func ReadFigures(path string) ([]Figure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var fs []Figure
	if err := json.Unmarshal(data, &fs); err != nil {
		return nil, fmt.Errorf("reading figures from %s: %w", path, err)
	}
	return fs, nil
}

// WriteFigures writes a JSON list of figures.
func WriteFigures(path string, fs []Figure) error {
	data, err := json.MarshalIndent(fs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
