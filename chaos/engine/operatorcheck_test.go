package engine

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
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

// A rise of a series the operator does not expose is no figure: the check
// says "not exposed" and is not judged, rather than reading +0 as within;
// a series that is there is judged, over every replica's scrape.
func TestMetricCheckOnAbsentSeries(t *testing.T) {
	g := NewWithT(t)
	scrape := func(text string) map[string]*dto.MetricFamily {
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
		g.Expect(err).NotTo(HaveOccurred())
		return fams
	}
	r := &run{res: &report.Result{}}
	none := 0.0
	panics := scenario.MetricAssertion{Name: "controller_runtime_reconcile_panics_total", MaxIncrease: &none}
	state := func(text string) operatorState {
		fams := scrape(text)
		return operatorState{uids: map[string]int32{"a": 0}, families: fams, each: map[string]map[string]*dto.MetricFamily{"a": fams}}
	}
	before := state("# TYPE redis_operator_ops counter\nredis_operator_ops 3\n")
	after := state("# TYPE redis_operator_ops counter\nredis_operator_ops 9\n")
	c, err := r.metricCheck(t.Context(), panics, before, &after)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Value).To(Equal("not exposed"))
	g.Expect(c.Budget).To(Equal("not judged (≤ 0): the operator's metrics have no such series"))
	g.Expect(c.OK()).To(BeTrue())

	ops := scenario.MetricAssertion{Name: "redis_operator_ops", MaxIncrease: new(5.0)}
	c, err = r.metricCheck(t.Context(), ops, before, &after)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Value).To(Equal("+6"))
	g.Expect(c.Violation).To(Equal("redis_operator_ops rose by 6 (budget 5)"))
}

// A counter's rise is judged pod by pod: a replica that restarted counts
// from zero, the one beside it from where it was; a new pod counts whole;
// a pod there before but not read then (not ready) is left out.
func TestCounterRise(t *testing.T) {
	g := NewWithT(t)
	errs := func(v float64) map[string]*dto.MetricFamily {
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(fmt.Sprintf(
			"# TYPE controller_runtime_reconcile_errors_total counter\ncontroller_runtime_reconcile_errors_total{controller=\"db\"} %v\n", v)))
		g.Expect(err).NotTo(HaveOccurred())
		return fams
	}
	type pods = map[string]map[string]*dto.MetricFamily
	labels := map[string]string{"controller": "db"}
	before := operatorState{uids: map[string]int32{"leader": 0, "standby": 0, "late": 0},
		each: pods{"leader": errs(40), "standby": errs(2)}} // late: running, not ready
	for _, tc := range []struct {
		why   string
		after operatorState
		want  float64
	}{
		{"both replicas read twice", operatorState{uids: map[string]int32{"leader": 0, "standby": 0}, each: pods{"leader": errs(43), "standby": errs(2)}}, 3},
		{"the leader restarted: its 5 are new, the standby's 40 before are not counted", operatorState{uids: map[string]int32{"leader": 1, "standby": 0}, each: pods{"leader": errs(5), "standby": errs(2)}}, 5},
		{"a pod replaced the leader", operatorState{uids: map[string]int32{"new": 0, "standby": 0}, each: pods{"new": errs(1), "standby": errs(4)}}, 3},
		{"a pod not read before has no baseline", operatorState{uids: map[string]int32{"leader": 0, "late": 0}, each: pods{"leader": errs(40), "late": errs(30)}}, 0},
	} {
		g.Expect(counterRise(before, tc.after, "controller_runtime_reconcile_errors_total", labels)).To(Equal(tc.want), tc.why)
	}
}
