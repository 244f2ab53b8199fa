package engine

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// The scrape reads the ready operator pods: one just restarted, running
// but not ready, may not serve its metrics yet. With none ready it reads
// the running ones, so that a lone operator's scrape still answers.
func TestScrapedPods(t *testing.T) {
	g := NewWithT(t)
	pod := func(name string, phase corev1.PodPhase, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	names := func(pods []corev1.Pod) (out []string) {
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	leader, standby := pod("leader", corev1.PodRunning, true), pod("standby", corev1.PodRunning, true)
	restarted, pending := pod("restarted", corev1.PodRunning, false), pod("pending", corev1.PodPending, false)
	g.Expect(names(scrapedPods([]corev1.Pod{leader, restarted, standby, pending}))).To(Equal([]string{"leader", "standby"}))
	g.Expect(names(scrapedPods([]corev1.Pod{restarted, pending}))).To(Equal([]string{"restarted"}))
	g.Expect(scrapedPods([]corev1.Pod{pending})).To(BeEmpty())
}
