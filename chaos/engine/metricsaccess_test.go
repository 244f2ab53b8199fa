package engine

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// A secure endpoint is scraped with the harness's token; each way a scrape
// fails says what to change.
func TestScrapeAt(t *testing.T) {
	g := NewWithT(t)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer granted" {
			http.Error(w, "Authorization denied", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, "controller_runtime_reconcile_total{controller=\"c\",result=\"success\"} 3\n")
	})
	secure := httptest.NewTLSServer(metrics)
	defer secure.Close()
	plain := httptest.NewServer(metrics)
	defer plain.Close()
	host := func(s *httptest.Server) string {
		return strings.TrimPrefix(strings.TrimPrefix(s.URL, "https://"), "http://")
	}
	skip := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test server's certificate

	e := &Engine{operator: &scenario.OperatorSpec{Namespace: "op", Metrics: &scenario.Metrics{Port: 8443, Secure: true}},
		metrics: metricsAccess{client: skip, token: "granted"}}
	fams, err := e.scrapeAt(t.Context(), host(secure))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fams).To(HaveKey("controller_runtime_reconcile_total"))

	e.metrics.token = "other"
	_, err = e.scrapeAt(t.Context(), host(secure))
	g.Expect(err).To(MatchError(ContainSubstring("HTTP 403")))
	g.Expect(err).To(MatchError(ContainSubstring("refused the token of op/gauntlet-metrics-reader, which may get /metrics")))

	_, err = e.scrapeAt(t.Context(), host(plain))
	g.Expect(err).To(MatchError(ContainSubstring("the endpoint speaks plain HTTP: leave out spec.metrics.secure")))

	e.operator.Metrics.Secure, e.metrics = false, metricsAccess{client: http.DefaultClient}
	_, err = e.scrapeAt(t.Context(), host(secure))
	g.Expect(err).To(MatchError(ContainSubstring("the endpoint speaks HTTPS: set spec.metrics.secure: true")))
}
