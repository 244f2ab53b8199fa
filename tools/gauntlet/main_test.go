package main

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "usage: gauntlet chaos"},
		{[]string{"chaso"}, "usage: gauntlet chaos"},
		{[]string{"chaos", "--seed", "-5", "--operator-image", "x"}, "--seed -5: want a non-negative integer"},
		{[]string{"chaos", "--seed", "abc"}, "invalid value \"abc\""},
		{[]string{"chaos"}, "--operator-image is required"},
		{[]string{"chaos", "--operator-image", "x", "--scenarios", "("}, "--scenarios: error parsing regexp"},
		{[]string{"chaos", "--operator-image", "x", "--scenarios", "no-such"}, `--scenarios "no-such" matches no scenario`},
		{[]string{"chaos", "--operator-image", "x", "--budgets", "/nonexistent.yaml"}, "--budgets: open /nonexistent.yaml"},
		{[]string{"chaos", "--operator-image", "x", "--kubeconfig", "/nonexistent"}, "--kubeconfig: stat /nonexistent"},
		{[]string{"chaos", "--operator-image", "x", "--timeout", "0s"}, "--timeout 0s: want a positive duration"},
		{[]string{"chaos", "--operator-image", "x", "extra"}, "unexpected arguments [extra]"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			var out, errb bytes.Buffer
			code := run(c.args, &out, &errb)
			g.Expect(code).To(Equal(2), errb.String())
			g.Expect(errb.String()).To(ContainSubstring(c.want))
		})
	}
}

func TestList(t *testing.T) {
	g := NewWithT(t)
	var out, errb bytes.Buffer
	g.Expect(run([]string{"chaos", "--list"}, &out, &errb)).To(Equal(0), errb.String())
	g.Expect(out.String()).To(And(ContainSubstring("leader-pod-kill"), ContainSubstring("upgrade-under-minority-pod-kill"),
		ContainSubstring("leader-delay-100ms")))
}
