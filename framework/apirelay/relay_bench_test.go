package apirelay

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkRelayOverhead measures what the relay adds to a request on
// this machine's loopback, the port-forward aside: the same HTTPS GET
// straight to the server and through the relay and a tunnel, each over a
// kept-alive HTTP/2 connection. It reports the median and 99th percentile
// of both and their differences.
func BenchmarkRelayOverhead(b *testing.B) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"db"},"data":{"k":"v"}}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	addr, _ := relayed(b, srv.Listener.Addr().String(), 2)
	direct := srv.Client()
	relayedClient := &http.Client{Transport: srv.Client().Transport.(*http.Transport).Clone()}
	get := func(c *http.Client, host string) time.Duration {
		start := time.Now()
		resp, err := c.Get("https://" + host + "/api/v1/namespaces/db/configmaps/a")
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		return time.Since(start)
	}
	var d, r []time.Duration
	for b.Loop() {
		d = append(d, get(direct, srv.Listener.Addr().String()))
		r = append(r, get(relayedClient, addr))
	}
	p50d, p99d := percentiles(d)
	p50r, p99r := percentiles(r)
	b.ReportMetric(float64(p50d.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(p99d.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(p50r.Microseconds()), "relayed-p50-µs")
	b.ReportMetric(float64(p99r.Microseconds()), "relayed-p99-µs")
	b.ReportMetric(float64((p50r - p50d).Microseconds()), "overhead-p50-µs")
	b.ReportMetric(float64((p99r - p99d).Microseconds()), "overhead-p99-µs")
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
