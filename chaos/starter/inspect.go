package starter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// Project is where to read from.
type Project struct {
	// Dir is the project's root (default ".").
	Dir string
	// Kustomize is the kustomization folder that deploys the operator
	// (default Dir/config/default).
	Kustomize string
	// Sample is the starting custom resource (default: the first file of
	// Dir/config/samples whose kind a CRD of the manifests serves).
	Sample string
}

// Found is what Inspect learned.
type Found struct {
	// Name names the operator (the project's name, else the Deployment's).
	Name string
	// Kustomize and Sample are the paths read.
	Kustomize, Sample string
	// Namespace, Selector and Image are the manager Deployment's.
	Namespace string
	Selector  map[string]string
	Image     string
	// ImageVariable is the variable the Operator file names the image by.
	ImageVariable string
	// Metrics is where the manager serves metrics, nil when it serves none.
	Metrics *scenario.Metrics
	// Kind and Plural are the sample's; Conditions says its CRD's status
	// has conditions.
	Kind, Plural string
	Conditions   bool
	// ObservedGeneration says its status has observedGeneration.
	ObservedGeneration bool
	// Variables are the ${NAME}s the sample uses, and ImageVariables
	// those of them that name an image (loaded into kind).
	Variables, ImageVariables []string
	// Resource is the sample, namespace removed.
	Resource *unstructured.Unstructured
	// IntField is an integer spec field the sample sets (spec.replicas,
	// spec.size...), changed during the operator-kill scenario; "" when
	// none.
	IntField string
	IntValue int64
	// Dir is the project's root; Main its manager's main package
	// ("./cmd", "." or "./cmd/manager"), "" when none was found, and
	// ManagerArgs the manager container's command and args.
	Dir, Main   string
	ManagerArgs []string
	// ManagerEnv is the manager container's environment as a process on
	// the host gets it: values as given, the downward API's namespace and
	// name as the Deployment's.
	ManagerEnv []EnvVar
	// Notes say what was guessed and what to check.
	Notes []string
}

// Inspect renders the project's manifests and reads what the files need.
func Inspect(p Project) (*Found, error) {
	if p.Dir == "" {
		p.Dir = "."
	}
	if p.Kustomize == "" {
		p.Kustomize = filepath.Join(p.Dir, "config", "default")
	}
	objs, err := cluster.RenderKustomization(p.Kustomize)
	if err != nil {
		return nil, fmt.Errorf("%w (give the folder that deploys the operator with --kustomize)", err)
	}
	f := &Found{Kustomize: p.Kustomize, Dir: p.Dir, Main: mainPackage(p.Dir)}
	if err := f.manager(objs); err != nil {
		return nil, err
	}
	if f.Main == "" {
		f.Notes = append(f.Notes, "no main package at cmd/main.go, main.go or cmd/manager/main.go: the Operator file has no spec.process, so envtest (gauntlet run --envtest, gauntlet explore) cannot run the manager until you add one")
	}
	f.Name = projectName(p.Dir, f.Name)
	f.ImageVariable = variableName(f.Name) + "_IMAGE"
	crds := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			crds[group+"/"+kind] = o
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("%s renders no CustomResourceDefinition: the operator's CRDs must be in the manifests it deploys", p.Kustomize)
	}
	sample, crd, err := pickSample(p, crds)
	if err != nil {
		return nil, err
	}
	f.Sample = sample
	return f, f.resource(sample, crd)
}

// manager finds the operator's Deployment: the one labelled
// control-plane: controller-manager (kubebuilder's), else the only one.
func (f *Found) manager(objs []*unstructured.Unstructured) error {
	var deployments []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			deployments = append(deployments, o)
		}
	}
	var d *unstructured.Unstructured
	for _, o := range deployments {
		if o.GetLabels()["control-plane"] == "controller-manager" {
			d = o
		}
	}
	if d == nil && len(deployments) == 1 {
		d = deployments[0]
	}
	if d == nil {
		return fmt.Errorf("the manifests hold %d Deployments and none is labelled control-plane: controller-manager: which one runs the operator?", len(deployments))
	}
	f.Name, f.Namespace = d.GetName(), d.GetNamespace()
	if f.Namespace == "" {
		return fmt.Errorf("the operator's Deployment %s names no namespace: its kustomization should set one", d.GetName())
	}
	f.Selector, _, _ = unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
	if len(f.Selector) == 0 {
		return fmt.Errorf("the operator's Deployment %s has no spec.selector.matchLabels", d.GetName())
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	var manager, rbacProxy map[string]any
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		switch name, _ := cm["name"].(string); {
		case name == "kube-rbac-proxy":
			rbacProxy = cm
		case manager == nil || name == "manager":
			manager = cm
		}
	}
	if manager == nil {
		return fmt.Errorf("the operator's Deployment %s has no container", d.GetName())
	}
	f.Image, _ = manager["image"].(string)
	f.ManagerArgs = args(manager)
	f.ManagerEnv, f.Notes = envOf(manager, d, f.Notes)
	f.Metrics = metricsOf(f.ManagerArgs, rbacProxy)
	if f.Metrics == nil {
		f.Notes = append(f.Notes, "the manager serves no metrics its pod exposes (--metrics-bind-address is 0 or on loopback): the Operator file has no spec.metrics, and runs are judged without the operator's reconcile counters")
	}
	return nil
}

// EnvVar is one variable of the process's environment, and where its
// value came from when the manifests did not give it as it is.
type EnvVar struct {
	Name, Value, From string
}

// envOf reads the container's env for a process run on the host: a value
// is taken as it is, a fieldRef to the pod's namespace or name becomes
// the Deployment's (a process has no pod), and what the host cannot give
// (other fields, Secrets, ConfigMaps, resources) is left out and said.
func envOf(c map[string]any, d *unstructured.Unstructured, notes []string) ([]EnvVar, []string) {
	list, _ := c["env"].([]any)
	var out []EnvVar
	for _, e := range list {
		em, _ := e.(map[string]any)
		name, _ := em["name"].(string)
		if name == "" {
			continue
		}
		if v, ok := em["value"].(string); ok {
			out = append(out, EnvVar{Name: name, Value: v})
			continue
		}
		path, _, _ := unstructured.NestedString(em, "valueFrom", "fieldRef", "fieldPath")
		switch path {
		case "metadata.namespace":
			out = append(out, EnvVar{Name: name, Value: d.GetNamespace(), From: "fieldRef metadata.namespace"})
		case "metadata.name":
			out = append(out, EnvVar{Name: name, Value: d.GetName() + "-process", From: "fieldRef metadata.name (a process has no pod)"})
		default:
			notes = append(notes, fmt.Sprintf("the manager's env %s comes from its pod (%v): spec.process.env leaves it out; give it a value there if the manager needs one on envtest", name, em["valueFrom"]))
		}
	}
	return out, notes
}

// mainPackage is the manager's main package in a kubebuilder (4: cmd/, 3:
// the root) or operator-sdk 0.x (cmd/manager/) layout, "" when none.
func mainPackage(dir string) string {
	for _, pkg := range []string{"cmd", ".", "cmd/manager"} {
		if _, err := os.Stat(filepath.Join(dir, pkg, "main.go")); err == nil {
			if pkg == "." {
				return pkg
			}
			return "./" + pkg
		}
	}
	return ""
}

func args(c map[string]any) []string {
	var out []string
	for _, key := range []string{"command", "args"} {
		list, _ := c[key].([]any)
		for _, a := range list {
			if s, ok := a.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// metricsOf reads the manager's metrics flags as controller-runtime and
// kubebuilder define them: --metrics-bind-address (":8443" in kubebuilder
// 4, served over HTTPS unless --metrics-secure=false), or a kube-rbac-proxy
// sidecar in front of a loopback address (kubebuilder 3).
func metricsOf(managerArgs []string, rbacProxy map[string]any) *scenario.Metrics {
	if rbacProxy != nil {
		port := int32(8443)
		for _, a := range args(rbacProxy) {
			if v, ok := strings.CutPrefix(a, "--secure-listen-address="); ok {
				port = portOf(v, port)
			}
		}
		return &scenario.Metrics{Port: port, Secure: true}
	}
	bind, secure, secureSet := "", false, false
	for _, a := range managerArgs {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="), strings.HasPrefix(a, "--metrics-addr="):
			bind = a[strings.Index(a, "=")+1:]
		case a == "--metrics-secure" || a == "--metrics-secure=true":
			secure, secureSet = true, true
		case a == "--metrics-secure=false":
			secure, secureSet = false, true
		}
	}
	if bind == "" || bind == "0" || strings.HasPrefix(bind, "127.") || strings.HasPrefix(bind, "localhost") {
		return nil
	}
	port := portOf(bind, 0)
	if port == 0 {
		return nil
	}
	if !secureSet {
		secure = port == 8443 // kubebuilder 4's default: --metrics-secure is true, on :8443
	}
	return &scenario.Metrics{Port: port, Secure: secure}
}

func portOf(addr string, def int32) int32 {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return def
	}
	n, err := strconv.ParseInt(addr[i+1:], 10, 32)
	if err != nil || n <= 0 {
		return def
	}
	return int32(n)
}

// projectName is the name in the project's PROJECT file (kubebuilder,
// operator-sdk), else the fallback.
func projectName(dir, fallback string) string {
	b, err := os.ReadFile(filepath.Join(dir, "PROJECT"))
	if err != nil {
		return fallback
	}
	var pf struct {
		ProjectName string `json:"projectName"`
	}
	if sigsyaml.Unmarshal(b, &pf) == nil && pf.ProjectName != "" {
		return pf.ProjectName
	}
	return fallback
}

var notWord = regexp.MustCompile(`[^A-Z0-9]+`)

// variableName makes NAME_LIKE_THIS of a name.
func variableName(name string) string {
	v := strings.Trim(notWord.ReplaceAllString(strings.ToUpper(name), "_"), "_")
	if v == "" || (v[0] >= '0' && v[0] <= '9') {
		v = "OPERATOR_" + v
	}
	return strings.TrimSuffix(v, "_")
}

// pickSample reads the sample the user named, else the first one of
// config/samples whose kind a CRD serves.
func pickSample(p Project, crds map[string]*unstructured.Unstructured) (string, *unstructured.Unstructured, error) {
	candidates := []string{p.Sample}
	if p.Sample == "" {
		candidates = samples(filepath.Join(p.Dir, "config", "samples"))
	}
	var seen []string
	for _, path := range candidates {
		u, err := readOne(path)
		if err != nil {
			if p.Sample != "" {
				return "", nil, err
			}
			continue
		}
		gk := u.GroupVersionKind().Group + "/" + u.GetKind()
		if crd, ok := crds[gk]; ok {
			return path, crd, nil
		}
		seen = append(seen, path+" ("+gk+")")
		if p.Sample != "" {
			return "", nil, fmt.Errorf("%s is a %s, and the manifests have no CRD for it", path, gk)
		}
	}
	served := make([]string, 0, len(crds))
	for gk := range crds {
		served = append(served, gk)
	}
	slices.Sort(served)
	return "", nil, fmt.Errorf("no sample custom resource of a kind the manifests serve (%s) in config/samples (read: %v): give one with --sample", strings.Join(served, ", "), seen)
}

// samples are the YAML files under dir, in its subfolders too, sorted,
// kustomization files left out.
func samples(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) && d.Name() != "kustomization.yaml" {
			out = append(out, path)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// readOne reads the first object of a YAML file.
func readOne(path string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New(path + ": holds no Kubernetes object")
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if u.GetKind() != "" && u.GetAPIVersion() != "" {
			return u, nil
		}
	}
}
