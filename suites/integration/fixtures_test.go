package integration

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// fixture is one file of fixtures/: its header and documents.
type fixture struct {
	rule     string
	expect   []string
	onUpdate bool
	docs     []*unstructured.Unstructured
}

func loadFixture(t *testing.T, path string) fixture {
	t.Helper()
	data, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var f fixture
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# rule:"):
			f.rule = strings.TrimSpace(strings.TrimPrefix(line, "# rule:"))
		case strings.HasPrefix(line, "# expect:"):
			f.expect = append(f.expect, strings.TrimSpace(strings.TrimPrefix(line, "# expect:")))
		case strings.TrimSpace(line) == "# on: update":
			f.onUpdate = true
		}
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		u := &unstructured.Unstructured{}
		NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed(), "%s", path)
		if len(u.Object) > 0 {
			f.docs = append(f.docs, u)
		}
	}
	return f
}

func fixtureFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(framework.CRDPath("fixtures"), dir, "*.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(files).NotTo(BeEmpty(), "no fixtures in fixtures/%s", dir)
	return files
}

// TestInvalidFixturesAreRejected: every manifest in fixtures/invalid is
// refused by the API server (schema, CEL or webhook) with a message naming
// the field.
func TestInvalidFixturesAreRejected(t *testing.T) {
	for _, path := range fixtureFiles(t, "invalid") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			f := loadFixture(t, path)
			g.Expect(f.rule).NotTo(BeEmpty(), "%s has no '# rule:' line", path)
			g.Expect(f.expect).NotTo(BeEmpty(), "%s has no '# expect:' line", path)
			ns := newNamespace(t, "invalid-")
			for _, d := range f.docs {
				d.SetNamespace(ns)
			}

			rejected := f.docs[0]
			if f.onUpdate {
				g.Expect(f.docs).To(HaveLen(2), "an update fixture has the original and the update")
				g.Expect(env.Client.Create(ctx, f.docs[0], client.FieldValidation("Strict"))).To(Succeed(), "the original must be valid")
				// The operator adds its finalizer meanwhile: apply the update
				// to the latest version, so the rejection comes from the rule
				// and not from optimistic concurrency.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					current := f.docs[0].DeepCopy()
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(current), current); err != nil {
						return err
					}
					rejected = f.docs[1].DeepCopy()
					rejected.SetResourceVersion(current.GetResourceVersion())
					rejected.SetFinalizers(current.GetFinalizers())
					return env.Client.Update(ctx, rejected, client.FieldValidation("Strict"))
				})
				g.Expect(err).To(HaveOccurred(), "rule %q: the update was accepted", f.rule)
				t.Logf("refused: %v", err)
				for _, want := range f.expect {
					g.Expect(err.Error()).To(ContainSubstring(want), "rule %q", f.rule)
				}
				return
			}
			g.Expect(f.docs).To(HaveLen(1))
			err := env.Client.Create(ctx, rejected, client.FieldValidation("Strict"))
			g.Expect(err).To(HaveOccurred(), "rule %q: the object was accepted", f.rule)
			t.Logf("refused: %v", err)
			for _, want := range f.expect {
				g.Expect(err.Error()).To(ContainSubstring(want), "rule %q", f.rule)
			}
			// Nothing was stored.
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rejected), &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": rejected.GetAPIVersion(), "kind": rejected.GetKind(),
			}})).NotTo(Succeed())
		})
	}
}

// TestSampleFixturesAreAccepted: every manifest in fixtures/samples is valid.
func TestSampleFixturesAreAccepted(t *testing.T) {
	for _, path := range fixtureFiles(t, "samples") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := NewWithT(t)
			f := loadFixture(t, path)
			ns := newNamespace(t, "samples-")
			for _, d := range f.docs {
				d.SetNamespace(ns)
				g.Expect(env.Client.Create(t.Context(), d, client.FieldValidation("Strict"))).To(Succeed(), "%s", path)
				policy, _, _ := unstructured.NestedString(d.Object, "spec", "deletionPolicy")
				g.Expect(policy).To(BeElementOf("Snapshot", "Delete"), "the schema defaults deletionPolicy")
			}
		})
	}
}
