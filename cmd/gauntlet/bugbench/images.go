package bugbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// images runs the bench's images command for tree t (made in dir), once
// per tree, and returns a --set flag for each NAME=VALUE line it wrote.
// Its output goes to <report>/images/<tree>.log.
func (r *Runner) images(ctx context.Context, t Tree, b *Bench, dir string) ([]string, error) {
	if len(b.Images) == 0 {
		return nil, nil
	}
	if set, ok := r.built[t.Key()]; ok {
		return set, nil
	}
	logs := filepath.Join(r.Out, "images")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	env := filepath.Join(logs, t.Key()+".env")
	log, err := os.Create(filepath.Join(logs, t.Key()+".log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	start := time.Now()
	r.logf("%s: images (%s)", t.Key(), strings.Join(b.Images, " "))
	cmd := exec.CommandContext(ctx, b.Images[0], b.Images[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = b.Scenarios, log, log
	cmd.Env = append(os.Environ(), b.Variable+"="+filepath.Join(dir, b.Subdir), "GAUNTLET_IMAGES_ENV="+env)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the images of %s (%s, log: %s): %w", t.Key(), strings.Join(b.Images, " "), log.Name(), err)
	}
	set, err := readImagesEnv(env)
	if err != nil {
		return nil, fmt.Errorf("the images of %s: %w", t.Key(), err)
	}
	r.logf("%s: images %s in %s", t.Key(), strings.Join(set, " "), time.Since(start).Round(time.Second))
	if r.built == nil {
		r.built = map[string][]string{}
	}
	r.built[t.Key()] = set
	return set, nil
}

// readImagesEnv reads an images command's NAME=VALUE lines (blank lines
// and # comments aside) as --set flags; it must name at least one.
func readImagesEnv(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the command wrote no %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	var set []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, _, ok := strings.Cut(line, "="); !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("%s:%d: %q is not NAME=VALUE", path, n, line)
		}
		set = append(set, "--set", line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("%s names no image (NAME=VALUE lines)", path)
	}
	return set, nil
}
