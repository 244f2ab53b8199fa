package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/framework"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// TestFailureBundle collects a bundle from a namespace holding a converged
// cluster: every object as YAML, events, the extra files, and, for pods
// logs (empty here: envtest runs no kubelet).
func TestFailureBundle(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t, "bundle-")
	c := reference.NewCluster(ns, "db").Build()
	create(t, c)
	waitForCondition(t, c, framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy))

	dir := t.TempDir()
	err := framework.CollectBundle(t.Context(), dir, framework.BundleOptions{
		Config:     env.Config,
		Namespaces: []string{ns},
		Files: map[string]func(context.Context) (string, error){
			"metrics.txt":      func(context.Context) (string, error) { return "reconcile_total 3\n", nil },
			"etcd-members.txt": func(context.Context) (string, error) { return "", errors.New("no etcd here") },
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range []string{
		"databaseclusters.database.gauntlet.dev/db.yaml",
		"statefulsets.apps/db.yaml",
		"services/db.yaml",
		"configmaps/db-members.yaml",
		"poddisruptionbudgets.policy/db.yaml",
		"pods/db-0.yaml",
	} {
		g.Expect(filepath.Join(dir, ns, "objects", f)).To(BeAnExistingFile())
	}
	sts, err := os.ReadFile(filepath.Join(dir, ns, "objects", "statefulsets.apps", "db.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(sts)).NotTo(ContainSubstring("managedFields"))
	g.Expect(os.ReadFile(filepath.Join(dir, "metrics.txt"))).To(BeEquivalentTo("reconcile_total 3\n"))
	g.Expect(os.ReadFile(filepath.Join(dir, "etcd-members.txt"))).To(ContainSubstring("no etcd here"))
	g.Expect(filepath.Join(dir, ns, "events.txt")).To(BeAnExistingFile())
	// envtest serves an empty log for a pod no kubelet runs; a real
	// cluster serves the container's output (the e2e tier checks that).
	g.Expect(filepath.Join(dir, ns, "logs", "db-0", "etcd.log")).To(BeAnExistingFile())
}
