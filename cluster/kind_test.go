package cluster

import (
	"io"
	"testing"
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
