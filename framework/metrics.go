package framework

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricValue reads one series from a registry: the value of a counter or
// gauge, or the sample count of a histogram or summary. Labels must match the
// series' labels exactly; a series that does not exist reads as 0 with
// found=false, so a test can assert that a counter never moved.
func MetricValue(g prometheus.Gatherer, name string, labels map[string]string) (value float64, found bool, err error) {
	families, err := g.Gather()
	if err != nil {
		return 0, false, fmt.Errorf("gathering metrics: %w", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsEqual(m.GetLabel(), labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true, nil
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true, nil
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true, nil
			case m.Summary != nil:
				return float64(m.GetSummary().GetSampleCount()), true, nil
			case m.Untyped != nil:
				return m.GetUntyped().GetValue(), true, nil
			}
		}
	}
	return 0, false, nil
}

func labelsEqual(pairs []*dto.LabelPair, want map[string]string) bool {
	if len(pairs) != len(want) {
		return false
	}
	for _, p := range pairs {
		if v, ok := want[p.GetName()]; !ok || v != p.GetValue() {
			return false
		}
	}
	return true
}

// DescribeSeries lists every series of a metric with its labels, for failure
// messages.
func DescribeSeries(g prometheus.Gatherer, name string) string {
	families, err := g.Gather()
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, p := range m.GetLabel() {
				ls = append(ls, p.GetName()+"="+p.GetValue())
			}
			lines = append(lines, fmt.Sprintf("  %s{%s} %s", name, strings.Join(ls, ","), m.String()))
		}
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "  (no series of " + name + ")"
	}
	return strings.Join(lines, "\n")
}
