package shard

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// The layout of a shard bundle, as the shard's pod sees it under
// BundleRoot.
const (
	BundleRoot      = "/gauntlet"
	BundleGauntlet  = "bin/gauntlet"
	BundleOperator  = "bin/operator"
	BundleEnvtest   = "k8s"
	BundleScenarios = "scenarios"
	bundleManifests = "operator-manifests.yaml"
)

// BundleOptions say what goes into a shard bundle.
type BundleOptions struct {
	// Set is the loaded scenario files; Overrides their --set values.
	Set       *scenario.Set
	Overrides map[string]string
	// Gauntlet is the gauntlet binary the shard runs (static, as make
	// gauntlet builds it).
	Gauntlet string
	// Assets is the folder with kube-apiserver and etcd.
	Assets string
	// Dir is the folder to write (made when missing).
	Dir  string
	Logf func(format string, args ...any)
}

// WriteBundle writes into o.Dir what a shard of a campaign needs to
// run `gauntlet explore --envtest` in a pod with no checkout and no
// toolchain: the programs (WritePrograms) and the operator with its
// scenario files at the bundle's root (WriteOperator).
func WriteBundle(ctx context.Context, o BundleOptions) error {
	if err := WritePrograms(o.Gauntlet, o.Assets, o.Dir); err != nil {
		return err
	}
	return WriteOperator(ctx, OperatorBundle{Set: o.Set, Overrides: o.Overrides, Dir: o.Dir, Root: BundleRoot, Logf: o.Logf})
}

// WritePrograms writes the programs every shard runs into dir: the
// gauntlet binary (static, as make gauntlet builds it) and envtest's
// kube-apiserver and etcd from assets.
func WritePrograms(gauntlet, assets, dir string) error {
	if err := copyFile(gauntlet, filepath.Join(dir, BundleGauntlet), 0o755); err != nil {
		return fmt.Errorf("the gauntlet binary: %w", err)
	}
	if err := static(filepath.Join(dir, BundleGauntlet)); err != nil {
		return fmt.Errorf("the gauntlet binary (make gauntlet builds it static): %w", err)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if err := copyFile(filepath.Join(assets, b), filepath.Join(dir, BundleEnvtest, b), 0o755); err != nil {
			return fmt.Errorf("envtest's %s: %w", b, err)
		}
	}
	return nil
}

// OperatorBundle is one operator in a shard bundle: its scenario files
// and the binary its Operator file starts.
type OperatorBundle struct {
	// Set is the loaded scenario files; Overrides their --set values.
	Set       *scenario.Set
	Overrides map[string]string
	// Dir is the folder to write; Root is where the shard's pod sees it.
	Dir, Root string
	Logf      func(format string, args ...any)
}

// WriteOperator writes the operator's binary (its Operator file's
// spec.process.build, run here) under o.Dir/bin, and under
// o.Dir/scenarios the scenario files with an Operator file that applies
// the manifests rendered here and starts the binary where the pod sees
// it. Every program must be static: the image holds nothing else.
func WriteOperator(ctx context.Context, o OperatorBundle) error {
	set := o.Set
	pr := set.Operator.Spec.Process
	if pr == nil || len(pr.Command) == 0 {
		return fmt.Errorf("%s has no spec.process: a shard runs the operator as a process on envtest, and the Operator file must say how to start it", set.OperatorFile)
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, BundleScenarios), 0o755); err != nil {
		return err
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	vars := render.Vars{Overrides: o.Overrides, Defaults: set.Operator.Spec.Variables}
	if err := bundleOperatorBinary(ctx, o, vars); err != nil {
		return err
	}
	objs, err := render.Operator(set.OperatorFile, &set.Operator.Spec, vars)
	if err != nil {
		return err
	}
	var manifests bytes.Buffer
	for _, u := range objs {
		b, err := sigsyaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		manifests.WriteString("---\n")
		manifests.Write(b)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, BundleScenarios, bundleManifests), manifests.Bytes(), 0o644); err != nil {
		return err
	}
	if err := writeBundleOperatorFile(o, vars); err != nil {
		return err
	}
	return copyScenarioFiles(set, filepath.Join(o.Dir, BundleScenarios))
}

// bundleOperatorBinary runs the process's build with its binary written
// into the bundle, or, with no build, copies the program its command
// names.
func bundleOperatorBinary(ctx context.Context, o OperatorBundle, vars render.Vars) error {
	pr := o.Set.Operator.Spec.Process
	dir := filepath.Dir(o.Set.OperatorFile)
	out, err := filepath.Abs(filepath.Join(o.Dir, BundleOperator))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if len(pr.Build) > 0 {
		v := vars
		v.Overrides = maps.Clone(vars.Overrides)
		if v.Overrides == nil {
			v.Overrides = map[string]string{}
		}
		v.Overrides[scenario.VarProcessBinary] = out
		// A Go build links statically without cgo: the image has no libc.
		if err := render.Build(ctx, pr.Build, dir, v, []string{"CGO_ENABLED=0"}, o.Logf); err != nil {
			return err
		}
		return static(out)
	}
	prog := vars.Expand(pr.Command[0])
	if !strings.Contains(prog, "/") {
		return fmt.Errorf("%s: spec.process.command runs %q from PATH, which a shard's image does not have: give spec.process.build, or a path to the binary", o.Set.OperatorFile, prog)
	}
	if err := copyFile(render.Program(prog, dir), out, 0o755); err != nil {
		return err
	}
	return static(out)
}

// static refuses a dynamically linked ELF program: the shard image holds
// no loader or libc to run it with. What is not ELF (a script, in a test)
// is left to the run to judge.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked, and a shard's image holds no libc to run it: build it static (for Go, CGO_ENABLED=0)", path)
		}
	}
	return nil
}

// writeBundleOperatorFile writes the Operator file the shard loads: the
// rendered manifests instead of a kustomization, no build, the binary at
// its place in the bundle, and the variables as resolved here.
func writeBundleOperatorFile(o OperatorBundle, vars render.Vars) error {
	op := *o.Set.Operator
	spec := op.Spec
	spec.Kustomize, spec.Manifests = "", []string{bundleManifests}
	spec.Variables = map[string]string{}
	for k := range o.Set.Operator.Spec.Variables {
		spec.Variables[k], _ = vars.Value(k)
	}
	pr := *spec.Process
	pr.Build = nil
	binary := filepath.Join(o.Root, BundleOperator)
	pr.Command = slices.Clone(pr.Command)
	if len(o.Set.Operator.Spec.Process.Build) == 0 {
		pr.Command[0] = binary
	}
	for i, a := range pr.Command {
		pr.Command[i] = strings.ReplaceAll(a, "${"+scenario.VarProcessBinary+"}", binary)
	}
	spec.Process = &pr
	op.Spec = spec
	b, err := sigsyaml.Marshal(op)
	if err != nil {
		return err
	}
	head := "# Written for a shard's bundle from " + o.Set.OperatorFile + ".\n"
	return os.WriteFile(filepath.Join(o.Dir, BundleScenarios, filepath.Base(o.Set.OperatorFile)), append([]byte(head), b...), 0o644)
}

// copyScenarioFiles copies each scenario file, and the resource manifest
// it names, into dir, keeping the manifest's path beside the file.
func copyScenarioFiles(set *scenario.Set, dir string) error {
	seen := map[string]string{filepath.Base(set.OperatorFile): set.OperatorFile, bundleManifests: "the rendered manifests"}
	for _, s := range set.Scenarios {
		file := set.Files[s.Metadata.Name]
		for _, p := range []string{filepath.Base(file), s.Spec.Resource.Manifest} {
			if p == "" {
				continue
			}
			src := filepath.Join(filepath.Dir(file), p)
			if !filepath.IsLocal(p) {
				return fmt.Errorf("%s: resource manifest %s is outside the scenario's folder, which is all a shard's bundle takes", file, p)
			}
			if was, ok := seen[p]; ok {
				if was != src {
					return fmt.Errorf("%s and %s are both %s in a shard's bundle: give them different names", was, src, p)
				}
				continue
			}
			seen[p] = src
			if err := copyFile(src, filepath.Join(dir, p), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
