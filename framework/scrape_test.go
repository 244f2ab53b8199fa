package framework

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func parseText(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Two replicas' scrapes merged: a sum counts both, a family only one has
// is kept, and labels still pick their series.
func TestMergeFamilies(t *testing.T) {
	g := NewWithT(t)
	leader := parseText(t, `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="db",result="success"} 7
controller_runtime_reconcile_total{controller="db",result="error"} 2
# TYPE workqueue_depth gauge
workqueue_depth{name="db"} 1
`)
	standby := parseText(t, `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="db",result="success"} 3
# TYPE go_goroutines gauge
go_goroutines 40
`)
	all := MergeFamilies(MergeFamilies(nil, leader), standby)
	g.Expect(SumSamples(all, "controller_runtime_reconcile_total", nil)).To(Equal(12.0))
	g.Expect(SumSamples(all, "controller_runtime_reconcile_total", map[string]string{"result": "success"})).To(Equal(10.0))
	g.Expect(SumSamples(all, "workqueue_depth", nil)).To(Equal(1.0))
	g.Expect(SumSamples(all, "go_goroutines", nil)).To(Equal(40.0))
	g.Expect(all).To(HaveLen(3))
}
