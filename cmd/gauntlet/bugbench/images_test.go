package bugbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// A bench's images command runs once per tree, in the bench's folder,
// with the tree in the bench's variable; each NAME=VALUE line it writes
// is a --set flag, and a command that fails or names nothing is an error
// that points at its log.
func TestImagesCommand(t *testing.T) {
	g := NewWithT(t)
	folder, out := t.TempDir(), t.TempDir()
	script := filepath.Join(folder, "images.sh")
	g.Expect(os.WriteFile(script, []byte(`#!/bin/sh
set -e
[ -f ./here ]
echo "built from $OPERATOR_SOURCE" >> calls
printf '# built\nOPERATOR_IMAGE=example.com/op:%s\n\nHELPER_IMAGE=example.com/helper:1\n' "$(basename "$OPERATOR_SOURCE")" > "$GAUNTLET_IMAGES_ENV"
`), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(folder, "here"), nil, 0o644)).To(Succeed())
	r := &Runner{Out: out}
	b := &Bench{Scenarios: folder, Variable: "OPERATOR_SOURCE", Subdir: "op", Images: []string{"./images.sh"}}
	tree := Tree{Operator: "example/op", Commit: "abcdef0123"}

	for range 2 {
		set, err := r.images(t.Context(), tree, b, "/src/tree1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(set).To(Equal([]string{"--set", "OPERATOR_IMAGE=example.com/op:op", "--set", "HELPER_IMAGE=example.com/helper:1"}))
	}
	calls, err := os.ReadFile(filepath.Join(folder, "calls"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(calls)).To(Equal("built from /src/tree1/op\n"), "once per tree")

	g.Expect(os.WriteFile(script, []byte("#!/bin/sh\necho 'no docker here' >&2\nexit 3\n"), 0o755)).To(Succeed())
	_, err = r.images(t.Context(), Tree{Operator: "example/op", Commit: "fedcba98"}, b, "/src/tree2")
	g.Expect(err).To(MatchError(ContainSubstring("building the images of example-op-fedcba98")))
	log, _ := os.ReadFile(filepath.Join(out, "images", "example-op-fedcba98.log"))
	g.Expect(string(log)).To(Equal("no docker here\n"))

	g.Expect(os.WriteFile(script, []byte("#!/bin/sh\necho 'OPERATOR IMAGE' > \"$GAUNTLET_IMAGES_ENV\"\n"), 0o755)).To(Succeed())
	_, err = r.images(t.Context(), Tree{Operator: "example/op", Commit: "0000aaaa"}, b, "/src/tree3")
	g.Expect(err).To(MatchError(ContainSubstring(`"OPERATOR IMAGE" is not NAME=VALUE`)))

	g.Expect(os.WriteFile(script, []byte("#!/bin/sh\n: > \"$GAUNTLET_IMAGES_ENV\"\n"), 0o755)).To(Succeed())
	_, err = r.images(t.Context(), Tree{Operator: "example/op", Commit: "1111bbbb"}, b, "/src/tree4")
	g.Expect(err).To(MatchError(ContainSubstring("names no image")))
	g.Expect(strings.Count(string(calls), "\n")).To(Equal(1))
}
