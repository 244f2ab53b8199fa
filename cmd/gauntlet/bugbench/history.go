package bugbench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
)

// The operators' history: which fix came after which, and which sources
// bring their own manifests.

// earlierFixes maps each fix commit of the group (by its tree's key) to
// the group's other fix commits that are its ancestors in the
// repository. A fix patch is on no commit's line: none is earlier or
// later than it.
func (r *Runner) earlierFixes(ctx context.Context, group []Bug, b *Bench) (map[string][]string, error) {
	var fixes []Tree
	for _, bug := range group {
		if fix, ok := bug.Fixed(); ok && fix.Pick != "" && !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	if len(fixes) < 2 {
		return nil, nil
	}
	repo, err := r.Sources.repo(ctx, group[0].Operator, b.Repo)
	if err != nil {
		return nil, err
	}
	earlier := map[string][]string{}
	for _, later := range fixes {
		for _, e := range fixes {
			if e == later {
				continue
			}
			switch yes, err := isAncestor(ctx, repo, e.Pick, later.Pick); {
			case err != nil:
				return nil, err
			case yes:
				earlier[later.Key()] = append(earlier[later.Key()], e.Key())
			}
		}
	}
	return earlier, nil
}

// descends says whether the tree's commit is commit or descends from it
// (the working tree, or a patch on such a commit, too).
func (r *Runner) descends(ctx context.Context, t Tree, commit string, b *Bench) (bool, error) {
	repo, err := r.Sources.repo(ctx, t.Operator, b.Repo)
	if err != nil {
		return false, err
	}
	head := t.Commit
	if head == "" {
		head = "HEAD"
	}
	return isAncestor(ctx, repo, commit, head)
}

// isAncestor says whether commit a is b or one of its ancestors in repo.
func isAncestor(ctx context.Context, repo, a, b string) (bool, error) {
	err := exec.CommandContext(ctx, "git", "-C", repo, "merge-base", "--is-ancestor", a, b).Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	}
	return false, fmt.Errorf("git merge-base --is-ancestor %s %s: %w", a, b, err)
}
