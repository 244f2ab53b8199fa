package engine

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

func TestKnownController(t *testing.T) {
	g := NewWithT(t)
	text := `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="memcached",result="success"} 4
controller_runtime_reconcile_total{controller="memcached",result="error"} 0
controller_runtime_reconcile_total{controller="backup",result="success"} 1
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	g.Expect(err).NotTo(HaveOccurred())
	e := &Engine{operator: &scenario.OperatorSpec{Metrics: &scenario.Metrics{Port: 8080, Controller: "memcached"}}}
	g.Expect(e.knownController(fams)).To(Succeed())
	e.operator.Metrics.Controller = "memcache"
	g.Expect(e.knownController(fams)).To(MatchError(`spec.metrics.controller "memcache": the operator has no such controller; its metrics name "backup", "memcached"`))
	g.Expect(e.knownController(map[string]*dto.MetricFamily{})).To(MatchError(ContainSubstring("no controller_runtime_reconcile_total series")))
}
