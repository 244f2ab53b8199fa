package preflight

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// Kubernetes' own kinds and those of the manifests' CRDs are served, and
// cert-manager's are stood in for; the others are listed by kind, with
// every object of each.
func TestUnserved(t *testing.T) {
	g := NewWithT(t)
	set, err := scenario.LoadPaths("testdata/unserved")
	g.Expect(err).NotTo(HaveOccurred())
	got, err := Unserved(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]string{
		"monitoring.coreos.com/v1 PodMonitor (cache-system/pods)",
		"monitoring.coreos.com/v1 ServiceMonitor (cache-system/cache-metrics, cache-system/node-metrics)",
	}))

	set, err = scenario.LoadPaths("../scenario/testdata/reference")
	g.Expect(err).NotTo(HaveOccurred())
	got, err = Unserved(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty(), "the reference operator's manifests need nothing beyond Kubernetes")
}
