package starter

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/preflight"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// A kubebuilder project is read from its rendered manifests: the
// manager's namespace, selector, image and metrics, the sample's kind,
// plural and status fields, an integer field to change, and a sample
// field the CRD would drop, left out and said.
func TestInspect(t *testing.T) {
	g := NewWithT(t)
	f, err := Inspect(Project{Dir: "testdata/project"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Name).To(Equal("cache-operator"), "the PROJECT file's name")
	g.Expect(f.ImageVariable).To(Equal("CACHE_OPERATOR_IMAGE"))
	g.Expect(f.Namespace).To(Equal("cache-operator-system"))
	g.Expect(f.Selector).To(Equal(map[string]string{"control-plane": "controller-manager"}))
	g.Expect(f.Image).To(Equal("controller:latest"))
	g.Expect(f.Metrics).To(Equal(&scenario.Metrics{Port: 8443, Secure: true}))
	g.Expect(f.Kind).To(Equal("Cache"))
	g.Expect(f.Plural).To(Equal("caches"))
	g.Expect(f.Conditions).To(BeTrue())
	g.Expect(f.ObservedGeneration).To(BeTrue())
	g.Expect(f.IntField).To(Equal("spec.size"))
	g.Expect(f.IntValue).To(Equal(int64(3)))
	g.Expect(f.Resource.GetNamespace()).To(BeEmpty(), "each scenario runs in a namespace of its own")
	g.Expect(f.Resource.Object["spec"]).NotTo(HaveKey("sizeLimit"))
	g.Expect(f.Resource.Object["spec"]).To(HaveKeyWithValue("labels", map[string]any{"tier": "cache"}), "a map of any keys is kept")
	g.Expect(f.Notes).To(ContainElement(ContainSubstring("left spec.sizeLimit out of the starting Cache")))
	g.Expect(f.Notes).To(ContainElement(HavePrefix("the sample runs memcached:1.6: a kind node pulls it")))
	g.Expect(f.ImageVariables).To(BeEmpty())
	g.Expect(f.ManagerEnv).To(Equal([]EnvVar{
		{Name: "WATCH_NAMESPACE", Value: ""},
		{Name: "OPERATOR_NAMESPACE", Value: "cache-operator-system", From: "fieldRef metadata.namespace"},
	}), "a value as given, the pod's namespace as the Deployment's; a Secret's left out")
	g.Expect(f.Notes).To(ContainElement(ContainSubstring("the manager's env API_TOKEN comes from its pod")))
}

// The files written validate at once against the project's manifests and
// CRD, and are not overwritten without force.
func TestWriteValidates(t *testing.T) {
	g := NewWithT(t)
	f, err := Inspect(Project{Dir: "testdata/project"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Main).To(Equal("./cmd"))
	// Beside the project, as ../project: the build's -C is relative to
	// the Operator file.
	out := filepath.Join(t.TempDir(), "gauntlet")
	proj := filepath.Join(filepath.Dir(out), "project")
	g.Expect(os.CopyFS(proj, os.DirFS("testdata/project"))).To(Succeed())
	f.Dir = proj
	files, err := Render(f, out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files.Write(out, false)).To(Succeed())
	set, err := scenario.LoadPaths(out)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = preflight.Check(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, s := range set.Scenarios {
		names = append(names, s.Metadata.Name)
	}
	g.Expect(names).To(Equal([]string{"pod-kill", "partition", "operator-kill-during-change", "status-conflicts", "explore-base"}))
	g.Expect(set.Operator.Spec.Metrics).To(Equal(&scenario.Metrics{Port: 8443, Secure: true, Controller: "cache"}))
	g.Expect(set.Scenarios[0].Spec.Roles["owned"].Owned).To(BeTrue(), "no label of the operator's is assumed")
	g.Expect(set.Scenarios[2].Spec.During[0].Patch).To(Equal(map[string]any{"spec": map[string]any{"size": float64(4)}}))
	g.Expect(set.Scenarios[4].Spec.Roles["operator"].Operator).To(BeTrue(), "explore's view faults act on the operator role")
	// envtest runs the manager built from the project, its listening
	// flags moved to the engine's addresses, no leader election.
	pr := set.Operator.Spec.Process
	g.Expect(pr).NotTo(BeNil())
	g.Expect(pr.Build).To(Equal([]string{"go", "build", "-C", "../project", "-o", "${GAUNTLET_PROCESS_BINARY}", "./cmd"}))
	g.Expect(pr.Command).To(Equal([]string{"${GAUNTLET_PROCESS_BINARY}", "--metrics-bind-address=${GAUNTLET_METRICS_ADDRESS}",
		"--health-probe-bind-address=${GAUNTLET_PROBE_ADDRESS}"}))
	g.Expect(pr.Env).To(Equal(map[string]string{"ENABLE_WEBHOOKS": "false", "WATCH_NAMESPACE": "", "OPERATOR_NAMESPACE": "cache-operator-system"}),
		"the manager's env as a process gets it")

	g.Expect(files.Write(out, false)).To(MatchError(ContainSubstring("already holds operator.yaml")))
	g.Expect(files.Write(out, true)).To(Succeed())
}

// A project init cannot read says what to give it.
func TestInspectSaysWhatIsMissing(t *testing.T) {
	g := NewWithT(t)
	_, err := Inspect(Project{Dir: t.TempDir()})
	g.Expect(err).To(MatchError(ContainSubstring("give the folder that deploys the operator with --kustomize")))

	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644)).To(Succeed())
	_, err = Inspect(Project{Dir: "testdata/project", Sample: filepath.Join(dir, "other.yaml")})
	g.Expect(err).To(MatchError(ContainSubstring("is a /ConfigMap, and the manifests have no CRD for it")))
}

// Metrics flags as controller-runtime and kubebuilder define them.
func TestMetricsOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		proxy map[string]any
		want  *scenario.Metrics
	}{
		{"kubebuilder 4", []string{"--metrics-bind-address=:8443"}, nil, &scenario.Metrics{Port: 8443, Secure: true}},
		{"plain", []string{"--metrics-bind-address=:8080"}, nil, &scenario.Metrics{Port: 8080}},
		{"secure off", []string{"--metrics-bind-address=:8443", "--metrics-secure=false"}, nil, &scenario.Metrics{Port: 8443}},
		{"secure on another port", []string{"--metrics-bind-address=:9443", "--metrics-secure"}, nil, &scenario.Metrics{Port: 9443, Secure: true}},
		{"off", []string{"--metrics-bind-address=0"}, nil, nil},
		{"loopback", []string{"--metrics-bind-address=127.0.0.1:8080"}, nil, nil},
		{"kube-rbac-proxy", []string{"--metrics-bind-address=127.0.0.1:8080"}, map[string]any{"args": []any{"--secure-listen-address=0.0.0.0:8443"}}, &scenario.Metrics{Port: 8443, Secure: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(metricsOf(tc.args, tc.proxy)).To(Equal(tc.want))
		})
	}
}

// A sample that uses ${NAME} gets the variable in every scenario, empty,
// and a note to --set it; the files still validate.
func TestSampleVariables(t *testing.T) {
	g := NewWithT(t)
	sample := filepath.Join(t.TempDir(), "cache.yaml")
	g.Expect(os.WriteFile(sample, []byte("apiVersion: cache.example.com/v1alpha1\nkind: Cache\nmetadata: {name: c}\nspec:\n  size: 1\n  image: ${CACHE_IMAGE}\n"), 0o644)).To(Succeed())
	f, err := Inspect(Project{Dir: "testdata/project", Sample: sample})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Variables).To(Equal([]string{"CACHE_IMAGE"}))
	g.Expect(f.Notes).To(ContainElement("the sample uses ${CACHE_IMAGE}: every scenario gives it an empty default; --set CACHE_IMAGE=... when you run"))
	out := filepath.Join(t.TempDir(), "gauntlet")
	files, err := Render(f, out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files.Write(out, false)).To(Succeed())
	set, err := scenario.LoadPaths(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Scenarios[0].Spec.Variables).To(HaveKeyWithValue("CACHE_IMAGE", ""))
	g.Expect(set.Operator.Spec.Images).To(ContainElement(HaveField("Name", "${CACHE_IMAGE}")), "loaded into kind for the resource")
}

// A project whose manager init cannot find gets no spec.process, and a
// note that says what envtest then lacks.
func TestNoMainPackageNoProcess(t *testing.T) {
	g := NewWithT(t)
	proj := filepath.Join(t.TempDir(), "project")
	g.Expect(os.CopyFS(proj, os.DirFS("testdata/project"))).To(Succeed())
	g.Expect(os.RemoveAll(filepath.Join(proj, "cmd"))).To(Succeed())
	f, err := Inspect(Project{Dir: proj})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Main).To(BeEmpty())
	g.Expect(f.Notes).To(ContainElement(ContainSubstring("the Operator file has no spec.process")))
	files, err := Render(f, filepath.Join(t.TempDir(), "gauntlet"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files[0].Content).NotTo(ContainSubstring("process:"))
}
