package bugbench

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Fix commits are ordered by the repository's history; a fix patch of
// ours is on no commit's line.
func TestEarlierFixesByAncestry(t *testing.T) {
	dir, c1, c2, patch := repo(t)
	r := &Runner{Sources: &Sources{Dir: t.TempDir()}}
	bugs := []Bug{
		{ID: "a", Operator: "o/p", BuggyCommit: c1, FixCommit: &c1},
		{ID: "b", Operator: "o/p", BuggyCommit: c1, FixCommit: &c2},
		{ID: "c", Operator: "o/p", BuggyCommit: c1, FixPatch: patch},
	}
	got, err := r.earlierFixes(t.Context(), bugs, &Bench{Repo: dir})
	if err != nil {
		t.Fatal(err)
	}
	fa, _ := bugs[0].Fixed()
	fb, _ := bugs[1].Fixed()
	want := map[string][]string{fb.Key(): {fa.Key()}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("earlier fixes = %v, want %v (the patch's tree in none)", got, want)
	}
}

// A bench tree goes to the sources that do not descend from its commit;
// one that does brings its own.
func TestTreesForOlderSourcesOnly(t *testing.T) {
	dir, c1, c2, _ := repo(t)
	b := &Bench{Repo: dir, Variable: "SRC", Trees: map[string]string{"MANIFESTS": c2}}
	r := &Runner{Sources: &Sources{Dir: t.TempDir()}}
	for _, tc := range []struct {
		commit, want string
	}{
		{c1, Tree{Operator: "o/p", Commit: c2}.Key()}, // older: the pinned tree
		{c2, Tree{Operator: "o/p", Commit: c2}.Key()}, // the commit itself: its own
		{"", Tree{Operator: "o/p"}.Key()},             // the working tree descends: its own
	} {
		src, err := r.source(t.Context(), Tree{Operator: "o/p", Commit: tc.commit}, b)
		if err != nil {
			t.Fatal(err)
		}
		if got := src.set[3]; filepath.Base(strings.TrimPrefix(got, "MANIFESTS=")) != tc.want {
			t.Errorf("source at %q: %s, want the tree %s", tc.commit, got, tc.want)
		}
	}
}
