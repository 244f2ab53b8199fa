package apiproxy

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// servingCert makes a certificate for 127.0.0.1 and ips signed by a CA of
// its own (client-go's helper), for this proxy's lifetime; it returns the
// certificate and the PEM a client trusts (the certificate and its CA).
func servingCert(ips []net.IP) (tls.Certificate, []byte, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", ips, []string{"localhost"})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("apiproxy: serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

func tlsServerConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
}

// upstreamTransport trusts the API server's CA and presents no client
// certificate: requests go on with the caller's own Authorization header.
func upstreamTransport(c *rest.Config) (http.RoundTripper, error) {
	trust := rest.CopyConfig(c)
	trust.TLSClientConfig = rest.TLSClientConfig{
		CAData: c.CAData, CAFile: c.CAFile, ServerName: c.ServerName, Insecure: c.Insecure,
	}
	trust.BearerToken, trust.BearerTokenFile, trust.Username, trust.Password = "", "", "", ""
	trust.ExecProvider, trust.AuthProvider, trust.Impersonate = nil, nil, rest.ImpersonationConfig{}
	tlsCfg, err := rest.TLSConfigFor(trust)
	if err != nil {
		return nil, fmt.Errorf("apiproxy: the API server's TLS settings: %w", err)
	}
	h1 := tlsCfg.Clone()
	h1.NextProtos = []string{"http/1.1"}
	return upgradeAware{
		base: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 32},
		h1:   &http.Transport{TLSClientConfig: h1, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}},
	}, nil
}

// upgradeAware sends a request that asks to switch protocols (exec,
// attach and port-forward, over SPDY or WebSocket) on HTTP/1.1, the only
// version that has Upgrade, and every other request on base, HTTP/2
// where the API server offers it. An operator that runs commands in its
// pods (a cluster's join, a backup) does so through the proxy too.
type upgradeAware struct{ base, h1 http.RoundTripper }

func (t upgradeAware) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Upgrade") != "" {
		return t.h1.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}
