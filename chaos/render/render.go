package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// Operator renders an Operator file's kustomization or manifests,
// variables expanded.
func Operator(file string, op *scenario.OperatorSpec, vars Vars) ([]*unstructured.Unstructured, error) {
	dir := filepath.Dir(file)
	for _, p := range append([]string{op.Kustomize}, op.Manifests...) {
		for _, m := range variableUse.FindAllStringSubmatch(p, -1) {
			if v, _ := vars.Value(m[1]); v == "" {
				return nil, fmt.Errorf("%s: ${%s} is empty: give it with --set %s=... or the environment", p, m[1], m[1])
			}
		}
	}
	var objs []*unstructured.Unstructured
	var err error
	if op.Kustomize != "" {
		objs, err = cluster.RenderKustomization(operatorPath(dir, op.Kustomize, vars))
	} else {
		for _, m := range op.Manifests {
			more, rerr := Objects(operatorPath(dir, m, vars), vars)
			objs, err = append(objs, more...), errors.Join(err, rerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rendering the operator's manifests: %w", err)
	}
	if objs, err = exclude(objs, op.Exclude); err != nil {
		return nil, err
	}
	return expandObjects(objs, vars)
}

// Unmatched are the entries of spec.exclude that matched no object of
// the manifests, each with what the manifests hold of its kind.
type Unmatched []UnmatchedExclude

// UnmatchedExclude is spec.exclude[Index], which matched nothing.
type UnmatchedExclude struct {
	Index   int
	Message string
}

func (u Unmatched) Error() string {
	var msgs []string
	for _, e := range u {
		msgs = append(msgs, fmt.Sprintf("spec.exclude[%d]: %s", e.Index, e.Message))
	}
	return strings.Join(msgs, "; ")
}

// exclude leaves out the objects each match matches; matches that match
// none are Unmatched.
func exclude(objs []*unstructured.Unstructured, matches []scenario.ObjectMatch) ([]*unstructured.Unstructured, error) {
	var unmatched Unmatched
	for i, m := range matches {
		var kept []*unstructured.Unstructured
		var same []string
		for _, u := range objs {
			if m.Matches(u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName()) {
				continue
			}
			kept = append(kept, u)
			if u.GetKind() == m.Kind {
				same = append(same, u.GetAPIVersion()+" "+path.Join(u.GetNamespace(), u.GetName()))
			}
		}
		if len(kept) == len(objs) {
			unmatched = append(unmatched, UnmatchedExclude{Index: i,
				Message: fmt.Sprintf("%s matches no object of the manifests; of that kind they hold %s", describeMatch(m), orNone(same))})
		}
		objs = kept
	}
	if len(unmatched) > 0 {
		return nil, unmatched
	}
	return objs, nil
}

func describeMatch(m scenario.ObjectMatch) string {
	s := m.Kind
	if m.APIVersion != "" {
		s = m.APIVersion + " " + s
	}
	if m.Name != "" {
		s += " " + path.Join(m.Namespace, m.Name)
	} else if m.Namespace != "" {
		s += " in " + m.Namespace
	}
	return s
}

func orNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

// operatorPath is a path of the Operator file's kustomize or manifests,
// variables expanded (so that it can name a checkout the user points at
// with --set): an absolute path as it is, a relative one from dir.
func operatorPath(dir, p string, vars Vars) string {
	return scenario.Beside(dir, vars.Expand(p))
}

// Resource is the one object of s's resource manifest, found beside s's
// file in set, variables expanded.
func Resource(set *scenario.Set, s *scenario.Scenario, vars Vars) (*unstructured.Unstructured, error) {
	objs, err := Objects(scenario.Beside(filepath.Dir(set.Files[s.Metadata.Name]), s.Spec.Resource.Manifest), vars)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s holds %d objects, want 1", s.Spec.Resource.Manifest, len(objs))
	}
	return objs[0], nil
}

// Objects reads the objects of a YAML file, variables expanded.
func Objects(path string, vars Vars) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(vars.Expand(string(b))), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// expandObjects expands variables in every string of the objects.
func expandObjects(objs []*unstructured.Unstructured, vars Vars) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		b, err := sigsyaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(vars.Expand(string(b))), &u.Object); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Build runs an Operator file's spec.process.build in dir, with
// env added to this process's environment.
func Build(ctx context.Context, argv []string, dir string, vars Vars, env []string, logf func(string, ...any)) error {
	start := time.Now()
	args := vars.ExpandAll(argv)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("building the operator (%s in %s): %w\n%s", strings.Join(args, " "), dir, err, out)
	}
	logf("built the operator (%s) in %s", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Program makes a program path with a slash relative to dir.
func Program(prog, dir string) string {
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		return filepath.Join(dir, prog)
	}
	return prog
}
