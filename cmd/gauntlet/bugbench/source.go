package bugbench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Sources makes the operators' source trees: a commit of their git
// repository (cloned once into Cache when it is a URL), or its working
// tree, with a patch applied.
type Sources struct {
	// Repos are local copies that stand for an operator's repository
	// (--repo OPERATOR=PATH), before the file's own.
	Repos map[string]string
	// Cache holds the clones of repositories named by URL.
	Cache string
	// Dir is where trees are made, one folder each.
	Dir string
}

// Make writes the tree into a new folder of s.Dir (once: a second call
// returns the same folder) and returns it.
func (s *Sources) Make(ctx context.Context, t Tree, b *Bench) (string, error) {
	dir := filepath.Join(s.Dir, t.Key())
	if _, err := os.Stat(filepath.Join(dir, ".gauntlet-tree")); err == nil {
		return dir, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	repo, err := s.repo(ctx, t.Operator, b.Repo)
	if err != nil {
		return "", err
	}
	if t.Commit == "" {
		err = copyWorkTree(ctx, repo, dir)
	} else {
		err = archive(ctx, repo, t.Commit, dir)
	}
	if err != nil {
		return "", fmt.Errorf("the source of %s at %s: %w", t.Operator, orWorkTree(t.Commit), err)
	}
	if t.Patch != "" {
		if err := apply(ctx, dir, t.Patch, nil); err != nil {
			return "", fmt.Errorf("applying %s: %w", t.Patch, err)
		}
	}
	if t.Pick != "" {
		diff, err := exec.CommandContext(ctx, "git", "-C", repo, "diff", "--binary", t.Pick+"^1", t.Pick).Output()
		if err != nil {
			return "", fmt.Errorf("the change of %s: git diff: %w", t.Pick, err)
		}
		if err := apply(ctx, dir, "-", diff); err != nil {
			return "", fmt.Errorf("the change of %s on %s: %w: %w", t.Pick, orWorkTree(t.Commit), errPickDoesNotApply, err)
		}
	}
	return dir, os.WriteFile(filepath.Join(dir, ".gauntlet-tree"), []byte(t.Key()+"\n"), 0o644)
}

// errPickDoesNotApply is Make's error for a tree whose Pick's change
// does not apply to its commit.
var errPickDoesNotApply = errors.New("it does not apply")

// apply applies a patch (a file, or "-" and its text) to the tree in dir.
func apply(ctx context.Context, dir, patch string, text []byte) error {
	// The tree is no repository: inside an enclosing one git apply
	// would skip every path outside the current folder in silence.
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "apply", patch)
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	if text != nil {
		cmd.Stdin = bytes.NewReader(text)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func orWorkTree(commit string) string {
	if commit == "" {
		return "the working tree"
	}
	return commit
}

// repo is a local git repository for the operator: --repo's, the file's
// path, or a clone of the file's URL in the cache.
func (s *Sources) repo(ctx context.Context, operator, repo string) (string, error) {
	if p, ok := s.Repos[operator]; ok {
		return p, nil
	}
	if !strings.Contains(repo, "://") {
		return repo, nil
	}
	sum := sha256.Sum256([]byte(repo))
	dir := filepath.Join(s.Cache, filepath.Base(repo)+"-"+hex.EncodeToString(sum[:4]))
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return dir, nil
	}
	if out, err := exec.CommandContext(ctx, "git", "clone", "--quiet", "--bare", repo, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cloning %s (or pass --repo %s=PATH to a local copy): %w: %s", repo, operator, err, out)
	}
	return dir, nil
}

// archive writes the commit's files into dir.
func archive(ctx context.Context, repo, commit, dir string) error {
	tar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	git := exec.CommandContext(ctx, "git", "-C", repo, "archive", commit)
	var gitErr bytes.Buffer
	git.Stderr = &gitErr
	pipe, err := git.StdoutPipe()
	if err != nil {
		return err
	}
	tar.Stdin = pipe
	if err := git.Start(); err != nil {
		return err
	}
	out, tarErr := tar.CombinedOutput()
	if err := git.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", commit, err, gitErr.String())
	}
	if tarErr != nil {
		return fmt.Errorf("tar: %w: %s", tarErr, out)
	}
	return nil
}

// copyWorkTree copies the repository's tracked files and the untracked
// ones git does not ignore, as they are on disk; a tracked file deleted
// there is left out.
func copyWorkTree(ctx context.Context, repo, dir string) error {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		if err := copyFile(filepath.Join(repo, name), filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	info, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	}
	if !info.Mode().IsRegular() {
		return nil // a submodule's folder: not part of the tree's files
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	w, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, in); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}
