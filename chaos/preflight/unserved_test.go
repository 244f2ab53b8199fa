package preflight

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// Kubernetes' own kinds and those of the manifests' CRDs are served; the
// others are listed by kind, with every object of each.
func TestUnserved(t *testing.T) {
	g := NewWithT(t)
	set, err := scenario.LoadPaths("testdata/unserved")
	g.Expect(err).NotTo(HaveOccurred())
	got, err := Unserved(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]string{
		"cert-manager.io/v1 Certificate (cache-system/serving-cert, cache-system/metrics-cert)",
		"cert-manager.io/v1 Issuer (cache-system/selfsigned-issuer)",
		"monitoring.coreos.com/v1 ServiceMonitor (cache-system/cache-metrics)",
	}))

	set, err = scenario.LoadPaths("../scenario/testdata/reference")
	g.Expect(err).NotTo(HaveOccurred())
	got, err = Unserved(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty(), "the reference operator's manifests need nothing beyond Kubernetes")
}
