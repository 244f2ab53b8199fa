package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// FieldError is one mistake in a file: where, and what.
type FieldError struct {
	File string
	Line int    // 0 when the field is absent (the line of its parent then)
	Path string // e.g. spec.fault.action
	Msg  string
}

func (e FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Path == "" {
		return loc + ": " + e.Msg
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Path, e.Msg)
}

// Errors are every mistake found in a set of files, in file and line order.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Set is what a directory (or a list of files) holds: one operator and its
// scenarios.
type Set struct {
	Operator     *Operator
	OperatorFile string
	Scenarios    []*Scenario
	// Files maps each scenario's name to its file.
	Files map[string]string
}

// HasViewFaults says whether any scenario of the set makes a view fault
// (through the API proxy).
func (s *Set) HasViewFaults() bool {
	return slices.ContainsFunc(s.Scenarios, func(sc *Scenario) bool { return IsViewAction(sc.Spec.Fault.Action) })
}

// LoadPaths reads every .yaml/.yml file of the given files and directories
// (not recursing) and checks them all; the error, an Errors, lists every
// mistake of every file.
func LoadPaths(paths ...string) (*Set, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no scenario files (*.yaml) in %s", strings.Join(paths, ", "))
	}
	set := &Set{Files: map[string]string{}}
	var errs Errors
	for _, f := range files {
		if !gauntletFile(f) {
			continue // a manifest a scenario reads
		}
		obj, ferrs := LoadFile(f)
		errs = append(errs, ferrs...)
		switch o := obj.(type) {
		case *Operator:
			if set.Operator != nil {
				errs = append(errs, FieldError{File: f, Line: 1, Msg: "a second Operator file (the first is " + set.OperatorFile + "); a set deploys one operator"})
				continue
			}
			set.Operator, set.OperatorFile = o, f
		case *Scenario:
			if prev, dup := set.Files[o.Metadata.Name]; dup {
				errs = append(errs, FieldError{File: f, Line: 1, Path: "metadata.name", Msg: fmt.Sprintf("%q is also the name of %s", o.Metadata.Name, prev)})
				continue
			}
			set.Scenarios = append(set.Scenarios, o)
			set.Files[o.Metadata.Name] = f
		}
	}
	if set.Operator == nil && len(set.Scenarios) > 0 && len(errs) == 0 {
		errs = append(errs, FieldError{File: files[0], Msg: "no Operator file among " + strings.Join(paths, ", ") + ": one says how to deploy the operator the scenarios test"})
	}
	if len(errs) > 0 {
		return set, errs
	}
	return set, nil
}

// gauntletFile tells whether a file in a directory is one of ours (kind
// Scenario or Operator, whatever its apiVersion, so that a wrong version is
// reported) rather than a manifest the scenarios read.
func gauntletFile(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return true // LoadFile reports it
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := sigsyaml.Unmarshal(b, &head); err != nil {
		return true
	}
	return head.Kind == KindScenario || head.Kind == KindOperator
}

// LoadFile reads and checks one file: an *Operator or a *Scenario, and
// every mistake found.
func LoadFile(path string) (any, Errors) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Errors{{File: path, Msg: err.Error()}}
	}
	return Parse(data, path)
}

// Parse checks data, named source in errors, against the format: the kind,
// every field's name and type (with its line), then every value.
func Parse(data []byte, source string) (any, Errors) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, Errors{{File: source, Msg: "not YAML: " + err.Error()}}
	}
	if len(doc.Content) == 0 {
		return nil, Errors{{File: source, Msg: "empty file"}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, Errors{{File: source, Line: root.Line, Msg: "want an object with apiVersion, kind, metadata and spec"}}
	}
	apiVersion, kind := scalar(root, "apiVersion"), scalar(root, "kind")
	if apiVersion != APIVersion {
		return nil, Errors{{File: source, Line: lineOf(root, "apiVersion"), Path: "apiVersion", Msg: fmt.Sprintf("%q: want %q", apiVersion, APIVersion)}}
	}
	var obj any
	switch kind {
	case KindScenario:
		obj = &Scenario{}
	case KindOperator:
		obj = &Operator{}
	default:
		return nil, Errors{{File: source, Line: lineOf(root, "kind"), Path: "kind", Msg: fmt.Sprintf("%q: want %s or %s", kind, KindScenario, KindOperator)}}
	}
	c := &checker{file: source, root: root}
	c.shape(root, reflect.TypeOf(obj).Elem(), "")
	if len(c.errs) > 0 {
		return nil, c.sorted()
	}
	if err := sigsyaml.UnmarshalStrict(data, obj); err != nil {
		return nil, Errors{{File: source, Msg: err.Error()}}
	}
	switch o := obj.(type) {
	case *Scenario:
		c.scenario(o, filepath.Dir(source))
	case *Operator:
		c.operator(o, filepath.Dir(source))
	}
	if len(c.errs) > 0 {
		return obj, c.sorted()
	}
	return obj, nil
}

// checker collects a file's mistakes.
type checker struct {
	file string
	root *yaml.Node
	errs Errors
}

func (c *checker) sorted() Errors {
	sort.SliceStable(c.errs, func(i, j int) bool { return c.errs[i].Line < c.errs[j].Line })
	return c.errs
}

// at records a mistake at a field path, with the line of the field (or of
// its nearest present parent).
func (c *checker) at(path, format string, args ...any) {
	c.errs = append(c.errs, FieldError{File: c.file, Line: lineOfPath(c.root, path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

var durationType = reflect.TypeFor[metav1.Duration]()

// shape walks the YAML against the Go type: unknown fields (with the
// nearest known name), objects where lists belong, strings where numbers
// belong, and malformed durations, each with its line.
func (c *checker) shape(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	fail := func(format string, args ...any) {
		c.errs = append(c.errs, FieldError{File: c.file, Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			fail("want a duration such as 30s or 2m")
		} else if d, err := time.ParseDuration(n.Value); err != nil {
			fail("%q is not a duration (such as 30s or 2m)", n.Value)
		} else if d < 0 {
			fail("%s: a duration here cannot be negative", n.Value)
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			fail("want an object with fields %s", strings.Join(jsonFields(t), ", "))
			return
		}
		fields := jsonFieldTypes(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				msg := "unknown field"
				if near := nearest(k.Value, jsonFields(t)); near != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", near)
				} else {
					msg += "; the fields here are " + strings.Join(jsonFields(t), ", ")
				}
				c.errs = append(c.errs, FieldError{File: c.file, Line: k.Line, Path: join(path, k.Value), Msg: msg})
				continue
			}
			c.shape(v, ft, join(path, k.Value))
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			fail("want a map of names to values")
			return
		}
		if t.Elem().Kind() == reflect.Interface {
			return // a free-form object (a merge patch)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.shape(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			fail("want a list")
			return
		}
		for i, item := range n.Content {
			c.shape(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			fail("want a string (quote it: %q)", n.Value)
		}
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			fail("want true or false, not %q", n.Value)
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			fail("want a whole number, not %q", n.Value)
		}
	case t.Kind() == reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			fail("want a number, not %q", n.Value)
		}
	}
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// jsonFieldTypes maps a struct's JSON field names to their types.
func jsonFieldTypes(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// nearest returns the known name within two edits of name, if any.
func nearest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := distance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func scalar(m *yaml.Node, key string) string {
	if v := child(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func lineOf(m *yaml.Node, key string) int {
	if m == nil || m.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return m.Line
}

// lineOfPath finds the line of a path such as spec.during[1].patch, or of
// the deepest part of it that exists.
func lineOfPath(root *yaml.Node, path string) int {
	n, line := root, root.Line
	for part := range strings.SplitSeq(path, ".") {
		name, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			name = part[:i]
			idx, _ = strconv.Atoi(part[i+1 : len(part)-1])
		}
		if name != "" {
			if n.Kind != yaml.MappingNode {
				return line
			}
			line = lineOf(n, name)
			if n = child(n, name); n == nil {
				return line
			}
		}
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
		}
	}
	return line
}

// ErrorAt is a mistake found at a field path of a file after it loaded
// (against the operator's manifests, say), with the line of that field.
func ErrorAt(file, path, format string, args ...any) FieldError {
	e := FieldError{File: file, Path: path, Msg: fmt.Sprintf(format, args...)}
	data, err := os.ReadFile(file)
	if err != nil {
		return e
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) > 0 {
		e.Line = lineOfPath(doc.Content[0], path)
	}
	return e
}

// QuoteAll lists values for a message that names the choices there were:
// each quoted, or "none".
func QuoteAll(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Beside is the path a file in dir names: as it is when absolute, else
// relative to dir (a scenario's manifest, an Operator file's manifests).
func Beside(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}
