package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// A leaf chains to its CA for its names and its usage only, within the
// CA's validity, and its key matches it.
func TestIssue(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ca, err := NewCA("test-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("svc.ns.svc", []string{"svc.ns.svc", "svc.ns.svc.cluster.local"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(pair.Cert, pair.Key); err != nil {
		t.Fatalf("the key does not match the certificate: %v", err)
	}
	block, _ := pem.Decode(pair.Cert)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	verify := func(name string, at time.Time, usage x509.ExtKeyUsage) error {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	if err := verify("svc.ns.svc.cluster.local", now, x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("serving svc.ns.svc.cluster.local: %v", err)
	}
	if err := verify("svc.ns.svc", now.Add(-30*time.Minute), x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("half an hour before now (a node's clock behind): %v", err)
	}
	for what, err := range map[string]error{
		"another name":        verify("other.ns.svc", now, x509.ExtKeyUsageServerAuth),
		"client usage":        verify("svc.ns.svc", now, x509.ExtKeyUsageClientAuth),
		"after the validity":  verify("svc.ns.svc", now.Add(25*time.Hour), x509.ExtKeyUsageServerAuth),
		"before the validity": verify("svc.ns.svc", now.Add(-2*time.Hour), x509.ExtKeyUsageServerAuth),
	} {
		if err == nil {
			t.Errorf("%s verified; want refused", what)
		}
	}
}
