package framework

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape fetches a Prometheus text endpoint over HTTP and parses it with
// expfmt, as Prometheus would.
func Scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	return ScrapeWith(ctx, url, ScrapeOptions{})
}

// ScrapeOptions say how to reach a metrics endpoint.
type ScrapeOptions struct {
	// Client makes the request (http.DefaultClient when nil): one with a
	// TLS configuration for an HTTPS endpoint.
	Client *http.Client
	// BearerToken, when set, is sent as the Authorization header, as
	// Prometheus does for an endpoint behind authentication.
	BearerToken string
}

// ScrapeWith is Scrape with a client and credentials of the caller's.
func ScrapeWith(ctx context.Context, url string, o ScrapeOptions) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if o.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+o.BearerToken)
	}
	c := o.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics from %s: %w", url, err)
	}
	return families, nil
}

// MergeFamilies puts the series of from into into, family by family (a
// family new to into is taken whole), and returns into: the scrapes of
// several replicas of one program, whose sums (SumSamples) then count
// every replica. A nil into starts an empty one; a family's metadata is
// the first scrape's.
func MergeFamilies(into, from map[string]*dto.MetricFamily) map[string]*dto.MetricFamily {
	if into == nil {
		into = map[string]*dto.MetricFamily{}
	}
	for name, mf := range from {
		have, ok := into[name]
		if !ok {
			into[name] = mf
			continue
		}
		have.Metric = append(have.Metric, mf.GetMetric()...)
	}
	return into
}

// CountSeries is how many series of a family have labels that include
// match: 0 when the endpoint exposes none (SumSamples then reads 0).
func CountSeries(families map[string]*dto.MetricFamily, name string, match map[string]string) int {
	n := 0
	for _, m := range families[name].GetMetric() {
		if labelsInclude(m.GetLabel(), match) {
			n++
		}
	}
	return n
}

// SumSamples adds every series of a family whose labels include match.
func SumSamples(families map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	mf, ok := families[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range mf.GetMetric() {
		if !labelsInclude(m.GetLabel(), match) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

func labelsInclude(pairs []*dto.LabelPair, match map[string]string) bool {
	found := 0
	for _, p := range pairs {
		if v, ok := match[p.GetName()]; ok {
			if v != p.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(match)
}

// MetricSelector writes a metric and its labels the way PromQL does:
// name{a="x",b="y"}, labels sorted.
func MetricSelector(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return name + "{" + strings.Join(pairs, ",") + "}"
}
