package cluster

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestExistingClusterIsAdoptedNotCreated(t *testing.T) {
	t.Setenv(EnvExistingCluster, "1")
	t.Setenv("KUBECONFIG", "")
	if _, err := Start(t.Context(), Options{Log: io.Discard}); err == nil {
		t.Fatal("an existing cluster without a kubeconfig was accepted")
	}
	t.Setenv("KUBECONFIG", "/tmp/some-kubeconfig")
	c, err := Start(t.Context(), Options{Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Existing || c.Kubeconfig != "/tmp/some-kubeconfig" {
		t.Fatalf("got %+v", c)
	}
	if err := c.Teardown(); err != nil {
		t.Fatalf("teardown of an existing cluster must do nothing: %v", err)
	}
	if err := c.LoadImages(t.Context(), "x:1"); err == nil {
		t.Fatal("loading images into an existing cluster must say it cannot")
	}
}

func TestForKindFillsInWhatCreationNeeds(t *testing.T) {
	tests := []struct {
		name  string
		in    Options
		check func(g Gomega, o Options)
	}{{
		name: "empty options get a random name, a temporary kubeconfig, two attempts, 3m",
		in:   Options{},
		check: func(g Gomega, o Options) {
			g.Expect(o.Name).To(MatchRegexp(`^gauntlet-[0-9a-f]{6}$`))
			g.Expect(o.Kubeconfig).To(BeAnExistingFile())
			g.Expect(strings.HasPrefix(o.Kubeconfig, os.TempDir())).To(BeTrue(), o.Kubeconfig)
			g.Expect(o.Attempts).To(Equal(2))
			g.Expect(o.WaitForReady).To(Equal(3 * time.Minute))
			g.Expect(os.Remove(o.Kubeconfig)).To(Succeed())
		},
	}, {
		name: "what is set is kept",
		in:   Options{Name: "mine", Kubeconfig: "/tmp/mine-kubeconfig", Attempts: 5, WaitForReady: time.Minute},
		check: func(g Gomega, o Options) {
			g.Expect(o).To(Equal(Options{Name: "mine", Kubeconfig: "/tmp/mine-kubeconfig", Attempts: 5, WaitForReady: time.Minute}))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o, err := tt.in.forKind()
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, o)
		})
	}
}
