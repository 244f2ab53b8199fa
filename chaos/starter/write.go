package starter

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"
)

// Files are the starter files, by name, in the order they are written.
type Files []File

// File is one file to write.
type File struct {
	Name, Content string
}

// Render makes the Operator file, the resource and the starter scenarios
// for a folder out, whose paths are relative to it.
func Render(f *Found, out string) (Files, error) {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	absK, err := filepath.Abs(f.Kustomize)
	if err != nil {
		return nil, err
	}
	kustomize, err := filepath.Rel(absOut, absK)
	if err != nil {
		return nil, err
	}
	resource, err := sigsyaml.Marshal(f.Resource.Object)
	if err != nil {
		return nil, err
	}
	absDir, err := filepath.Abs(f.Dir)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Rel(absOut, absDir)
	if err != nil {
		return nil, err
	}
	manifest := strings.ToLower(f.Kind) + ".yaml"
	files := Files{
		{"operator.yaml", f.operatorFile(filepath.ToSlash(kustomize)) + f.process(filepath.ToSlash(dir))},
		{manifest, fmt.Sprintf("# The starting %s, from %s.\n%s", f.Kind, f.Sample, resource)},
	}
	for _, s := range f.scenarios() {
		files = append(files, File{s.file, s.render(f, manifest)})
	}
	return files, nil
}

// Write writes the files into out, refusing to overwrite one unless force.
func (files Files) Write(out string, force bool) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if !force {
		var exist []string
		for _, file := range files {
			if _, err := os.Stat(filepath.Join(out, file.Name)); err == nil {
				exist = append(exist, file.Name)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		if len(exist) > 0 {
			return fmt.Errorf("%s already holds %s: pass --force to overwrite", out, strings.Join(exist, ", "))
		}
	}
	for _, file := range files {
		if err := os.WriteFile(filepath.Join(out, file.Name), []byte(file.Content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// operatorFile is the Operator file.
func (f *Found) operatorFile(kustomize string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by gauntlet init from %s; edit freely.
# Build your operator's image, then:
#   gauntlet run -f <this folder> --set %s=<your image>
apiVersion: gauntlet.dev/v1alpha1
kind: Operator
metadata:
  name: %s
spec:
  variables:
    %s: %s   # the image your manifests name: --set the one you built
%s  kustomize: %s
  images:
    - name: ${%s}
      replaces: %s
%s  namespace: %s
  selector:
`, f.Kustomize, f.ImageVariable, f.Name, f.ImageVariable, f.Image, sampleVariables(f.ImageVariables), kustomize, f.ImageVariable, imageName(f.Image), sampleImages(f.ImageVariables), f.Namespace)
	keys := make([]string, 0, len(f.Selector))
	for k := range f.Selector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "    %s: %s\n", k, quote(f.Selector[k]))
	}
	if m := f.Metrics; m != nil {
		fmt.Fprintf(&b, "  metrics:\n    port: %d\n", m.Port)
		if m.Secure {
			b.WriteString("    secure: true                   # HTTPS, authenticated and authorized, as kubebuilder serves it\n")
		}
		fmt.Fprintf(&b, "    controller: %s             # controller-runtime names a controller after its kind\n", strings.ToLower(f.Kind))
	}
	return b.String()
}

// process is the Operator file's spec.process: on envtest (gauntlet run
// --envtest, gauntlet explore) the manager is built from the project and
// run on the host behind the API proxy, with the flags of the manifests'
// that say where it listens, moved to the addresses the engine gives;
// leader election, which needs the pod's namespace, is left off.
func (f *Found) process(dir string) string {
	if f.Main == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("  # On envtest (gauntlet run --envtest, gauntlet explore): the manager built\n")
	b.WriteString("  # from the project and run as a process on the host, behind the API proxy.\n")
	fmt.Fprintf(&b, "  process:\n    build: [go, build, -C, %s, -o, \"${GAUNTLET_PROCESS_BINARY}\", %s]\n", quote(dir), f.Main)
	b.WriteString("    command:\n      - ${GAUNTLET_PROCESS_BINARY}\n")
	for _, flag := range []struct{ name, address string }{
		{"--metrics-bind-address", "${GAUNTLET_METRICS_ADDRESS}"},
		{"--health-probe-bind-address", "${GAUNTLET_PROBE_ADDRESS}"},
	} {
		if slices.ContainsFunc(f.ManagerArgs, func(a string) bool { return a == flag.name || strings.HasPrefix(a, flag.name+"=") }) {
			fmt.Fprintf(&b, "      - %s=%s\n", flag.name, flag.address)
		}
	}
	b.WriteString("    env:\n      ENABLE_WEBHOOKS: \"false\"   # kubebuilder's switch: a process has no webhook certificates\n")
	for _, e := range f.ManagerEnv {
		if e.Name == "ENABLE_WEBHOOKS" {
			continue
		}
		fmt.Fprintf(&b, "      %s: %s", e.Name, quote(e.Value))
		if e.From != "" {
			fmt.Fprintf(&b, "   # the Deployment's %s", e.From)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// sampleVariables are the Operator file's defaults of the sample's image
// variables, and sampleImages its images entries that load them.
func sampleVariables(names []string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "    %s: \"\"   # an image the sample runs: --set it\n", n)
	}
	return b.String()
}

func sampleImages(names []string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "    - name: ${%s}                 # loaded for the resource\n", n)
	}
	return b.String()
}

// imageName is an image reference without its tag or digest.
func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// quote writes a string on one line that YAML reads back as itself: a
// JSON string is a YAML double-quoted one.
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSpace(b.String())
}
