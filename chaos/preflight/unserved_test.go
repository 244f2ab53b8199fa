package preflight

import (
	"errors"

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
	got, err := Check(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]Unserved{
		{GroupVersion: "monitoring.coreos.com/v1", Kind: "PodMonitor", Objects: []string{"cache-system/pods"}},
		{GroupVersion: "monitoring.coreos.com/v1", Kind: "ServiceMonitor", Objects: []string{"cache-system/cache-metrics", "cache-system/node-metrics"}},
	}))
	g.Expect(got[1].String()).To(Equal("monitoring.coreos.com/v1 ServiceMonitor (cache-system/cache-metrics, cache-system/node-metrics)"))

	set, err = scenario.LoadPaths("../scenario/testdata/reference")
	g.Expect(err).NotTo(HaveOccurred())
	got, err = Check(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty(), "the reference operator's manifests need nothing beyond Kubernetes")
}

// spec.exclude leaves objects out of the rendered manifests, by kind or
// by name; one that matches nothing is refused at its entry, with what
// the manifests hold of its kind.
func TestExclude(t *testing.T) {
	g := NewWithT(t)
	set, err := scenario.LoadPaths("testdata/unserved")
	g.Expect(err).NotTo(HaveOccurred())
	set.Operator.Spec.Exclude = []scenario.ObjectMatch{{Kind: "ServiceMonitor"}, {Kind: "PodMonitor", APIVersion: "monitoring.coreos.com/v1", Name: "pods", Namespace: "cache-system"}}
	got, err := Check(set, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty())

	set.Operator.Spec.Exclude = []scenario.ObjectMatch{{Kind: "ServiceMonitor", Name: "cache-metricz"}, {Kind: "PodMonitor", APIVersion: "monitoring.coreos.com/v2"}}
	_, err = Check(set, nil)
	var errs scenario.Errors
	g.Expect(errors.As(err, &errs)).To(BeTrue(), "%v", err)
	g.Expect(errs).To(HaveLen(2))
	g.Expect(errs[0].Error()).To(HaveSuffix("spec.exclude[0]: ServiceMonitor cache-metricz matches no object of the manifests; of that kind they hold monitoring.coreos.com/v1 cache-system/cache-metrics, monitoring.coreos.com/v1 cache-system/node-metrics"))
	g.Expect(errs[1].Error()).To(HaveSuffix("spec.exclude[1]: monitoring.coreos.com/v2 PodMonitor matches no object of the manifests; of that kind they hold monitoring.coreos.com/v1 cache-system/pods"))
}
