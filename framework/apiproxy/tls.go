package apiproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// servingCert makes a CA and a certificate for 127.0.0.1 signed by it,
// for this proxy's lifetime; it returns the certificate and the CA's PEM.
func servingCert() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gauntlet-apiproxy-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gauntlet-apiproxy"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
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
	return &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 32}, nil
}
