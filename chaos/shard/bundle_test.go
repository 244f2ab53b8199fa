package shard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/starter"
)

// starterFiles are the files gauntlet init writes for the kubebuilder
// project in chaos/starter's testdata, beside a copy of it.
func starterFiles(t *testing.T) *scenario.Set {
	t.Helper()
	dir := t.TempDir()
	proj := filepath.Join(dir, "project")
	if err := os.CopyFS(proj, os.DirFS("../starter/testdata/project")); err != nil {
		t.Fatal(err)
	}
	found, err := starter.Inspect(starter.Project{Dir: proj})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "gauntlet")
	files, err := starter.Render(found, out)
	if err == nil {
		err = files.Write(out, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	set, err := scenario.LoadPaths(out)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestWriteBundle bundles a kubebuilder project's starter files with a
// prebuilt binary in place of its build, and loads the bundle's files
// back.
func TestWriteBundle(t *testing.T) {
	set := starterFiles(t)
	tmp := t.TempDir()
	for _, f := range []string{"gauntlet", "op", "k8s/kube-apiserver", "k8s/etcd"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tmp, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), []byte("#!"+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	set.Operator.Spec.Process = &scenario.Process{
		Command: []string{filepath.Join(tmp, "op"), "--image=${CACHE_OPERATOR_IMAGE}", "--self=${GAUNTLET_PROCESS_BINARY}"},
	}
	dir := filepath.Join(tmp, "bundle")
	err := WriteBundle(t.Context(), BundleOptions{Set: set, Overrides: map[string]string{"CACHE_OPERATOR_IMAGE": "mirror/cache:1"},
		Gauntlet: filepath.Join(tmp, "gauntlet"), Assets: filepath.Join(tmp, "k8s"), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{BundleGauntlet: "#!gauntlet", BundleOperator: "#!op",
		BundleEnvtest + "/kube-apiserver": "#!k8s/kube-apiserver", BundleEnvtest + "/etcd": "#!k8s/etcd"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(b) != want {
			t.Errorf("%s holds %q (%v), want %q", file, b, err, want)
		}
	}

	got, err := scenario.LoadPaths(filepath.Join(dir, BundleScenarios))
	if err != nil {
		t.Fatalf("the bundle's files do not load: %v", err)
	}
	if len(got.Scenarios) != len(set.Scenarios) {
		t.Errorf("%d scenarios in the bundle, want %d", len(got.Scenarios), len(set.Scenarios))
	}
	op := got.Operator.Spec
	if op.Kustomize != "" || !slices.Equal(op.Manifests, []string{bundleManifests}) {
		t.Errorf("kustomize %q, manifests %v; want the manifests rendered here", op.Kustomize, op.Manifests)
	}
	binary := BundleRoot + "/" + BundleOperator
	if want := []string{binary, "--image=${CACHE_OPERATOR_IMAGE}", "--self=" + binary}; !slices.Equal(op.Process.Command, want) {
		t.Errorf("command %v, want %v", op.Process.Command, want)
	}
	if op.Process.Build != nil {
		t.Errorf("build %v; a shard's pod has no toolchain", op.Process.Build)
	}
	if op.Variables["CACHE_OPERATOR_IMAGE"] != "mirror/cache:1" {
		t.Errorf("CACHE_OPERATOR_IMAGE = %q, want the --set value resolved here", op.Variables["CACHE_OPERATOR_IMAGE"])
	}
	manifests, err := os.ReadFile(filepath.Join(dir, BundleScenarios, bundleManifests))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manifests), "kind: CustomResourceDefinition") || strings.Contains(string(manifests), "${") {
		t.Errorf("the rendered manifests lack the CRD or hold a variable:\n%.400s", manifests)
	}
}

func TestWriteBundleRefusesAProgramFromPath(t *testing.T) {
	set := starterFiles(t)
	set.Operator.Spec.Process = &scenario.Process{Command: []string{"python3", "op.py"}}
	tmp := t.TempDir()
	for _, f := range []string{"gauntlet", "k8s/kube-apiserver", "k8s/etcd"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(tmp, f)), 0o755)
		_ = os.WriteFile(filepath.Join(tmp, f), nil, 0o755)
	}
	err := WriteBundle(t.Context(), BundleOptions{Set: set, Gauntlet: filepath.Join(tmp, "gauntlet"),
		Assets: filepath.Join(tmp, "k8s"), Dir: filepath.Join(tmp, "b")})
	if err == nil || !strings.Contains(err.Error(), "from PATH") {
		t.Errorf("error %v, want one saying the image has no PATH to find python3 on", err)
	}
}

func TestStaticRefusesADynamicProgram(t *testing.T) {
	dynamic := "/bin/ls" // Debian's, linked against libc
	if _, err := os.Stat(dynamic); err != nil {
		t.Skipf("no %s on this machine to try (Debian has one): %v", dynamic, err)
	}
	if err := static(dynamic); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("error %v, want one saying %s is dynamically linked", err, dynamic)
	}
}
