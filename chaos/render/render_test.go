package render

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestVars(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("GAUNTLET_TEST_FROM_ENV", "env")
	v := Vars{Overrides: map[string]string{"A": "override"}, Defaults: map[string]string{"A": "default", "B": "default", "GAUNTLET_TEST_FROM_ENV": "default"}}
	g.Expect(v.Expand("${A} ${B} ${GAUNTLET_TEST_FROM_ENV} ${UNKNOWN} $B")).To(Equal("override default env ${UNKNOWN} $B"))
}

func TestReadObjectsExpandsVariables(t *testing.T) {
	g := NewWithT(t)
	p := filepath.Join(t.TempDir(), "m.yaml")
	g.Expect(os.WriteFile(p, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {image: \"${IMG}\"}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"), 0o644)).To(Succeed())
	objs, err := Objects(p, Vars{Defaults: map[string]string{"IMG": "etcd:v1"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2), "empty documents are skipped")
	g.Expect(objs[0].Object["data"]).To(HaveKeyWithValue("image", "etcd:v1"))
}
