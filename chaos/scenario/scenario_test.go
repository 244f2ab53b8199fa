package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestTheReferenceExamplesLoad(t *testing.T) {
	g := NewWithT(t)
	set, err := LoadPaths("testdata/reference")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Operator.Metadata.Name).To(Equal("databasecluster-operator"))
	g.Expect(set.Operator.Spec.Metrics.Controller).To(Equal("databasecluster"))
	g.Expect(set.Scenarios).To(HaveLen(3), "cluster.yaml is a manifest, not a scenario")
	byName := map[string]*Scenario{}
	for _, s := range set.Scenarios {
		byName[s.Metadata.Name] = s
	}
	p := byName["leader-partition"].Spec
	g.Expect(p.Fault.Action).To(Equal(ActionPartition))
	g.Expect(p.Fault.Hold.Duration.Seconds()).To(Equal(20.0))
	g.Expect(p.Roles["leader"].Probe.Contains).To(Equal("etcd_server_is_leader 1"))
	g.Expect(p.Assertions.Conditions[2].Never).To(Equal("False"))
	g.Expect(*p.Assertions.Metrics[2].EqualsAfter).To(BeZero())
	up := byName["upgrade-under-minority-pod-kill"].Spec
	g.Expect(up.During[0].Patch).To(HaveKeyWithValue("spec", map[string]any{"image": "${ETCD_UPGRADE_TO}"}))
	g.Expect(up.Roles["minority"].Pick).To(Equal("minority"))
}

// TestInvalidFilesAreRefused loads every file of chaos/scenario/testdata/invalid:
// each has one mistake and a first line "# want: <message>"; it must be
// refused with exactly that one message, at a line of the file.
func TestInvalidFilesAreRefused(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		first, _, _ := strings.Cut(string(b), "\n")
		want, ok := strings.CutPrefix(first, "# want: ")
		if !ok {
			continue // a manifest the scenarios read
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			_, errs := LoadFile(f)
			g.Expect(errs).To(HaveLen(1), "one message per mistake: %v", errs)
			g.Expect(errs[0].Error()).To(ContainSubstring(want))
			g.Expect(errs[0].Line).To(BeNumerically(">", 1), "the line of the mistake")
			g.Expect(errs[0].Error()).To(HavePrefix(f + ":"))
		})
	}
	NewWithT(t).Expect(n).To(BeNumerically(">=", 10))
}

func TestLinesPointAtTheMistake(t *testing.T) {
	g := NewWithT(t)
	_, errs := LoadFile("testdata/invalid/unknown-field.yaml")
	g.Expect(errs).To(HaveLen(1))
	b, err := os.ReadFile("testdata/invalid/unknown-field.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	line := strings.Split(string(b), "\n")[errs[0].Line-1]
	g.Expect(line).To(Equal("    acton: partition"))
}

func TestEveryMistakeOfASetIsListed(t *testing.T) {
	g := NewWithT(t)
	_, err := LoadPaths("testdata/invalid")
	var es Errors
	g.Expect(errors.As(err, &es)).To(BeTrue())
	g.Expect(len(es)).To(BeNumerically(">=", 20), "every bad file's mistake, not the first only")
}

func TestParseRefusesWhatIsNotAScenario(t *testing.T) {
	cases := map[string]string{
		"":                          "empty file",
		"- a\n- b\n":                "want an object with apiVersion",
		"apiVersion: v1\nkind: Pod": `apiVersion: "v1": want "gauntlet.dev/v1alpha1"`,
		"apiVersion: gauntlet.dev/v1alpha1\nkind: Suite\n": `kind: "Suite": want Scenario or Operator`,
		"a: [": "not YAML",
	}
	for doc, want := range cases {
		t.Run(want, func(t *testing.T) {
			_, errs := Parse([]byte(doc), "x.yaml")
			NewWithT(t).Expect(errs.Error()).To(ContainSubstring(want))
		})
	}
}

func TestNearest(t *testing.T) {
	g := NewWithT(t)
	g.Expect(nearest("acton", []string{"action", "target"})).To(Equal("action"))
	g.Expect(nearest("Target", []string{"action", "target"})).To(Equal("target"))
	g.Expect(nearest("zzzzzz", []string{"action", "target"})).To(BeEmpty())
}

// An Operator file may name its manifests by absolute paths.
func TestAbsolutePathsInAnOperatorFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	abs, err := filepath.Abs("testdata/reference")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile("testdata/reference/operator.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	op, _ := LoadFile("testdata/reference/operator.yaml")
	o := op.(*Operator)
	text := string(b)
	if o.Spec.Kustomize != "" {
		text = strings.Replace(text, "kustomize: "+o.Spec.Kustomize, "kustomize: "+filepath.Join(abs, o.Spec.Kustomize), 1)
	}
	for _, m := range o.Spec.Manifests {
		text = strings.Replace(text, m, filepath.Join(abs, m), 1)
	}
	g.Expect(text).NotTo(Equal(string(b)), "the reference Operator file names a path")
	g.Expect(os.WriteFile(filepath.Join(dir, "operator.yaml"), []byte(text), 0o644)).To(Succeed())
	_, errs := LoadFile(filepath.Join(dir, "operator.yaml"))
	g.Expect(errs).To(BeEmpty())
}
