package apiproxy

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// BenchmarkOverhead measures what the proxy adds to a request: the same GET
// of a small object, straight to a TLS upstream and through the proxy, each
// over a kept-alive HTTP/2 connection. It reports the median and the 99th
// percentile of both, and their difference (the overhead; the issue's
// budget is 1 ms at p50 and 5 ms at p99).
func BenchmarkOverhead(b *testing.B) {
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"db"},"data":{"k":"v"}}`))
	}))
	upstream.EnableHTTP2 = true
	upstream.StartTLS()
	defer upstream.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	direct := &rest.Config{Host: upstream.URL, BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	p, err := Start(direct, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	directClient, err := rest.HTTPClientFor(direct)
	if err != nil {
		b.Fatal(err)
	}
	proxied := p.Config("t")
	proxiedClient, err := rest.HTTPClientFor(proxied)
	if err != nil {
		b.Fatal(err)
	}
	get := func(c *http.Client, host string) time.Duration {
		start := time.Now()
		resp, err := c.Get(host + "/api/v1/namespaces/db/configmaps/a")
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		return time.Since(start)
	}
	var d, v []time.Duration
	for b.Loop() {
		d = append(d, get(directClient, direct.Host))
		v = append(v, get(proxiedClient, proxied.Host))
	}
	p50d, p99d := percentiles(d)
	p50v, p99v := percentiles(v)
	b.ReportMetric(float64(p50d.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(p99d.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(p50v.Microseconds()), "proxied-p50-µs")
	b.ReportMetric(float64(p99v.Microseconds()), "proxied-p99-µs")
	b.ReportMetric(float64((p50v - p50d).Microseconds()), "overhead-p50-µs")
	b.ReportMetric(float64((p99v - p99d).Microseconds()), "overhead-p99-µs")
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
