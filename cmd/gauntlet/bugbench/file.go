// Package bugbench runs a bug benchmark: published bugs of real operators
// (Sieve's and Acto's lists) and the reference operator's variants, each
// named by the operator's commit before and after its fix, found again by
// `gauntlet explore` with nothing written per bug. A bug is found when a
// finding of the campaign on its buggy source fails there on replay and
// passes on its fix.
package bugbench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// File is a benchmark file: the operators, with how to campaign on each,
// and their bugs.
type File struct {
	Operators []Operator `json:"operators"`
	Bugs      []Bug      `json:"bugs"`

	// Path is where the file was read from; the paths in it are relative
	// to its folder.
	Path string `json:"-"`
}

// Operator is an operator of the benchmark. Everything but Bench records
// where its bugs were published and what the tools that found them spent.
type Operator struct {
	Operator           string            `json:"operator"`
	System             string            `json:"system,omitempty"`
	Module             string            `json:"module,omitempty"`
	SieveCommit        string            `json:"sieveCommit,omitempty"`
	ActoCommit         string            `json:"actoCommit,omitempty"`
	ActoAnalysisCommit string            `json:"actoAnalysisCommit,omitempty"`
	Manifests          map[string]string `json:"manifests,omitempty"`
	ToolCost           map[string]string `json:"toolCost,omitempty"`
	Bench              *Bench            `json:"bench,omitempty"`
	// Kind is how to campaign on kind (bench bugs --kind), where the
	// managed system runs in real pods: its own folder and base, and the
	// command that builds a source's images. Bench is used where it is
	// not given.
	Kind *Bench `json:"kind,omitempty"`
}

// Bench is all that is written per operator: the folder with its
// Operator file and one base scenario (one starting resource), and where
// its source comes from.
type Bench struct {
	// Scenarios is the folder holding the Operator file and the base
	// scenario.
	Scenarios string `json:"scenarios"`
	// Base names the scenario the campaigns start from.
	Base string `json:"base"`
	// Repo is the operator's git repository: a path or a URL. --repo
	// OPERATOR=PATH names a local copy instead.
	Repo string `json:"repo"`
	// Subdir is the folder of the source tree the Operator file builds
	// from ("" for its root).
	Subdir string `json:"subdir,omitempty"`
	// Variable is the Operator file's variable that receives the source
	// tree (default OPERATOR_SOURCE).
	Variable string `json:"variable,omitempty"`
	// SkipFields are spec fields the campaigns leave alone: values the
	// environment cannot run.
	SkipFields []string `json:"skipFields,omitempty"`
	// Trees are further Operator file variables, each receiving the
	// source tree of a fixed commit of the same repository (manifests a
	// later commit has in a form today's API server serves), for every
	// source that does not descend from it: one that does brings its own,
	// and receives itself.
	Trees map[string]string `json:"trees,omitempty"`
	// Images is a command run once for each source tree before the
	// runs on it, in the Scenarios folder, with Variable set to the tree
	// and GAUNTLET_IMAGES_ENV to a file where it writes NAME=VALUE lines
	// (the images it built from the tree): each is handed to the Operator
	// file as --set NAME=VALUE. On kind, where the operator runs from an
	// image, a tree's own code reaches the cluster only this way.
	Images []string `json:"images,omitempty"`
}

// Bug is a published bug (or a variant of ours) and the sources before
// and after its fix.
type Bug struct {
	ID       string   `json:"id"`
	Operator string   `json:"operator"`
	Source   string   `json:"source,omitempty"`
	ListedIn []string `json:"listedIn,omitempty"`
	Class    string   `json:"class"`
	Oracle   []string `json:"oracle,omitempty"`
	Issue    string   `json:"issue,omitempty"`
	// BuggyCommit is the source with the bug ("" for the repository's
	// working tree, with what is not committed); BuggyPatch, a patch
	// applied to it (a variant of ours).
	BuggyCommit string `json:"buggyCommit,omitempty"`
	BuggyPatch  string `json:"buggyPatch,omitempty"`
	// FixCommit is the source with the fix (null when none is known). A
	// bug made by a patch is fixed by its commit without the patch.
	FixCommit *string `json:"fixCommit"`
	// FixPatch, where no fix commit is known, is a fix of ours: a patch
	// applied to BuggyCommit (the fix is that tree with it).
	FixPatch string `json:"fixPatch,omitempty"`

	ToolResult       string   `json:"toolResult,omitempty"`
	StartingResource string   `json:"startingResource,omitempty"`
	Verified         []string `json:"verified,omitempty"`
	Note             string   `json:"note,omitempty"`
}

// Tree is one source of an operator: a commit ("" for the working tree)
// and a patch on it, or the change another commit made (Pick: its diff
// against its first parent, a merged pull request's whole change).
type Tree struct {
	Operator string
	Commit   string
	Patch    string
	Pick     string
}

// Key names the tree in folders and tables.
func (t Tree) Key() string {
	k := strings.NewReplacer("/", "-", ".", "-").Replace(t.Operator)
	c := t.Commit
	if c == "" {
		c = "worktree"
	}
	if len(c) > 8 {
		c = c[:8]
	}
	k += "-" + c
	if t.Patch != "" {
		k += "-" + strings.TrimSuffix(filepath.Base(t.Patch), filepath.Ext(t.Patch))
	}
	if t.Pick != "" {
		k += "-pick-" + t.Pick[:min(8, len(t.Pick))]
	}
	return k
}

// Whole is the tree of a Pick's commit itself.
func (t Tree) Whole() Tree {
	return Tree{Operator: t.Operator, Commit: t.Pick}
}

// Buggy is the source with the bug.
func (b Bug) Buggy() Tree {
	return Tree{Operator: b.Operator, Commit: b.BuggyCommit, Patch: b.BuggyPatch}
}

// Fixed is the source with the fix, when one is known: the buggy commit
// with the fix commit's own change, so that a finding is judged by the
// fix and not by whatever else changed between the two commits (where
// that change does not apply, the runner replays on the fix commit's
// tree instead and says so: Whole).
func (b Bug) Fixed() (Tree, bool) {
	switch {
	case b.FixCommit != nil && *b.FixCommit != "":
		return Tree{Operator: b.Operator, Commit: b.BuggyCommit, Pick: *b.FixCommit}, true
	case b.FixPatch != "":
		return Tree{Operator: b.Operator, Commit: b.BuggyCommit, Patch: b.FixPatch}, true
	case b.BuggyPatch != "":
		return Tree{Operator: b.Operator, Commit: b.BuggyCommit}, true
	}
	return Tree{}, false
}

// Load reads and checks a benchmark file: paths are made absolute and
// every bug's operator has a bench stanza, with the patch it names.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &File{}
	if err := yaml.UnmarshalStrict(b, f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Path, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	return f, f.check()
}

func (f *File) check() error {
	dir := filepath.Dir(f.Path)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) || strings.Contains(p, "://") {
			return p
		}
		return filepath.Join(dir, p)
	}
	var errs []error
	ops := map[string]*Operator{}
	for i := range f.Operators {
		op := &f.Operators[i]
		ops[op.Operator] = op
		for name, b := range map[string]*Bench{"bench": op.Bench, "kind": op.Kind} {
			if b == nil {
				continue
			}
			if b.Scenarios == "" || b.Base == "" || b.Repo == "" {
				errs = append(errs, fmt.Errorf("operator %s: %s needs scenarios, base and repo", op.Operator, name))
			}
			b.Scenarios, b.Repo = abs(b.Scenarios), abs(b.Repo)
			if b.Variable == "" {
				b.Variable = "OPERATOR_SOURCE"
			}
		}
	}
	seen := map[string]bool{}
	for i := range f.Bugs {
		bug := &f.Bugs[i]
		switch op := ops[bug.Operator]; {
		case bug.ID == "" || seen[bug.ID]:
			errs = append(errs, fmt.Errorf("bug %d: id %q is empty or not unique", i+1, bug.ID))
		case op == nil:
			errs = append(errs, fmt.Errorf("bug %s: no operator %q in the file", bug.ID, bug.Operator))
		}
		seen[bug.ID] = true
		if bug.FixPatch != "" && (bug.BuggyPatch != "" || bug.FixCommit != nil && *bug.FixCommit != "") {
			errs = append(errs, fmt.Errorf("bug %s: a fixPatch is the fix of a buggyCommit with no fixCommit and no buggyPatch", bug.ID))
		}
		for _, p := range []*string{&bug.BuggyPatch, &bug.FixPatch} {
			if *p == "" {
				continue
			}
			*p = abs(*p)
			if _, err := os.Stat(*p); err != nil {
				errs = append(errs, fmt.Errorf("bug %s: %w", bug.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Bench is the bench stanza of the bug's operator, its kind stanza on
// kind where it has one (nil: the file says nothing of how to run it).
func (f *File) Bench(bug Bug, kind bool) *Bench {
	for _, op := range f.Operators {
		switch {
		case op.Operator != bug.Operator:
		case kind && op.Kind != nil:
			return op.Kind
		default:
			return op.Bench
		}
	}
	return nil
}

// Select are the bugs named (all when none is), in the file's order.
func (f *File) Select(ids []string) ([]Bug, error) {
	if len(ids) == 0 {
		return f.Bugs, nil
	}
	var out []Bug
	for _, id := range ids {
		i := -1
		for j, b := range f.Bugs {
			if b.ID == id {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("no bug %q in %s", id, f.Path)
		}
		out = append(out, f.Bugs[i])
	}
	return out, nil
}

// Options are a benchmark run's campaign settings, the same for every bug.
type Options struct {
	Seed        uint64
	Budget      time.Duration
	Sequences   int
	MaxFindings int
	// Kind runs the campaigns and replays on kind rather than envtest.
	Kind bool
	// Shards spreads each campaign over so many shards of an Indexed Job
	// on a kind cluster (gauntlet explore --shards), MultiNode on the
	// multi-node one; the replays stay on this machine's envtest unless
	// Kind.
	Shards    int
	MultiNode bool
	// Job runs the benchmark as an Indexed Job on a cluster, one shard
	// per campaign, each running its campaign and replays in its pod
	// (bench bugs --job); MultiNode on the multi-node kind cluster.
	Job bool
}
