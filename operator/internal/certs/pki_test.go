package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func testPolicy(names ...string) policy {
	if len(names) == 0 {
		names = Options{ServiceName: "webhook", Namespace: "system", ClusterDomain: DefaultClusterDomain}.dnsNames()
	}
	return policy{commonName: names[0], dnsNames: names, caValidity: 10 * year, certValidity: year}
}

// mustIssue returns Secret data issued at now.
func mustIssue(t *testing.T, p policy, now time.Time) map[string][]byte {
	t.Helper()
	data, err := issue(decision{action: renewAll}, p, now)
	if err != nil {
		t.Fatalf("issuing: %v", err)
	}
	return data
}

func parseLeaf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	certs, err := parseCerts(data[KeyTLSCert])
	if err != nil {
		t.Fatalf("parsing %s: %v", KeyTLSCert, err)
	}
	return certs[0]
}

func TestIssuedCertificateVerifiesForEveryName(t *testing.T) {
	g := NewWithT(t)
	p := testPolicy()
	g.Expect(p.dnsNames).To(Equal([]string{"webhook", "webhook.system", "webhook.system.svc", "webhook.system.svc.cluster.local"}))
	now := time.Now()
	data := mustIssue(t, p, now)
	g.Expect(data).To(HaveKey(KeyCAKey))

	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(data[KeyCACert])).To(BeTrue())
	leaf := parseLeaf(t, data)
	for _, name := range append(p.dnsNames, "") {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		g.Expect(err).NotTo(HaveOccurred(), "name %q", name)
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: "webhook.other.svc", Roots: roots, CurrentTime: now})
	g.Expect(err).To(HaveOccurred(), "a name the certificate was not issued for")

	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	g.Expect(ok).To(BeTrue(), "key type %T", leaf.PublicKey)
	g.Expect(pub.Curve).To(Equal(elliptic.P256()))
	g.Expect(leaf.NotAfter).To(BeTemporally("~", now.Add(year), time.Second))
	g.Expect(leaf.IsCA).To(BeFalse())
	_, err = tls.X509KeyPair(data[KeyTLSCert], data[KeyTLSKey])
	g.Expect(err).NotTo(HaveOccurred())
}

func TestAssess(t *testing.T) {
	p := testPolicy()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	base := mustIssue(t, p, t0)
	other := mustIssue(t, p, t0)
	otherNames := mustIssue(t, testPolicy("webhook", "webhook.elsewhere", "webhook.elsewhere.svc"), t0)

	with := func(kv ...any) map[string][]byte {
		data := map[string][]byte{}
		for k, v := range base {
			data[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			switch v := kv[i+1].(type) {
			case string:
				data[kv[i].(string)] = []byte(v)
			case []byte:
				data[kv[i].(string)] = v
			}
		}
		return data
	}
	withRenewBefore := p
	withRenewBefore.renewBefore = 30 * day

	cases := []struct {
		name string
		data map[string][]byte
		p    policy
		now  time.Time
		want action
	}{
		{name: "no secret", data: nil, p: p, now: t0, want: renewAll},
		{name: "fresh", data: base, p: p, now: t0, want: keep},
		{name: "before the renewal window", data: base, p: p, now: t0.Add(240 * day), want: keep},
		{name: "within the renewal window", data: base, p: p, now: t0.Add(250 * day), want: renewServing},
		{name: "serving certificate expired", data: base, p: p, now: t0.Add(400 * day), want: renewServing},
		{name: "explicit RenewBefore, outside it", data: base, p: withRenewBefore, now: t0.Add(250 * day), want: keep},
		{name: "explicit RenewBefore, within it", data: base, p: withRenewBefore, now: t0.Add(340 * day), want: renewServing},
		{name: "wrong DNS names", data: with(KeyTLSCert, otherNames[KeyTLSCert], KeyTLSKey, otherNames[KeyTLSKey]), p: p, now: t0, want: renewServing},
		{name: "garbage serving certificate", data: with(KeyTLSCert, "garbage"), p: p, now: t0, want: renewServing},
		{name: "serving key of another certificate", data: with(KeyTLSKey, other[KeyTLSKey]), p: p, now: t0, want: renewServing},
		{name: "serving certificate of another CA", data: with(KeyTLSCert, other[KeyTLSCert], KeyTLSKey, other[KeyTLSKey]), p: p, now: t0, want: renewServing},
		{name: "missing CA key", data: with(KeyCAKey, ""), p: p, now: t0, want: renewAll},
		{name: "garbage CA", data: with(KeyCACert, "-----BEGIN CERTIFICATE-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE-----\n"), p: p, now: t0, want: renewAll},
		{name: "CA key of another CA", data: with(KeyCAKey, other[KeyCAKey]), p: p, now: t0, want: renewAll},
		{name: "serving certificate as CA", data: with(KeyCACert, base[KeyTLSCert], KeyCAKey, base[KeyTLSKey]), p: p, now: t0, want: renewAll},
		{name: "CA within its renewal window", data: base, p: p, now: t0.Add(7 * year), want: renewAll},
		{name: "CA expired", data: base, p: p, now: t0.Add(11 * year), want: renewAll},
		{name: "CA not valid yet", data: base, p: p, now: t0.Add(-2 * time.Hour), want: renewAll},
		{name: "garbage everywhere", data: map[string][]byte{KeyCACert: []byte("x"), KeyCAKey: []byte("y"), KeyTLSCert: []byte("z"), KeyTLSKey: []byte("w")}, p: p, now: t0, want: renewAll},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := assess(tc.data, tc.p, tc.now)
			g.Expect(d.action).To(Equal(tc.want), "reason: %s", d.reason)
			if tc.want != keep {
				g.Expect(d.reason).NotTo(BeEmpty())
			}
			if tc.want == renewServing {
				g.Expect(d.ca).NotTo(BeNil())
			}
		})
	}
}

func TestIssueKeepsOrRotatesTheCA(t *testing.T) {
	g := NewWithT(t)
	p := testPolicy()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	first := mustIssue(t, p, t0)

	// The serving certificate is due: the CA and the bundle stay, byte for byte.
	now := t0.Add(300 * day)
	d := assess(first, p, now)
	g.Expect(d.action).To(Equal(renewServing))
	renewed, err := issue(d, p, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renewed[KeyCACert]).To(Equal(first[KeyCACert]))
	g.Expect(renewed[KeyCAKey]).To(Equal(first[KeyCAKey]))
	g.Expect(renewed[KeyTLSCert]).NotTo(Equal(first[KeyTLSCert]))
	g.Expect(assess(renewed, p, now).action).To(Equal(keep))
	g.Expect(parseLeaf(t, renewed).NotBefore).To(Equal(now.Add(-backdate)))

	// The CA is due: a new CA signs, and the old one stays trusted until it expires.
	now = t0.Add(7 * year)
	d = assess(renewed, p, now)
	g.Expect(d.action).To(Equal(renewAll))
	rotated, err := issue(d, p, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(assess(rotated, p, now).action).To(Equal(keep))
	bundle, err := parseCerts(rotated[KeyCACert])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundle).To(HaveLen(2))
	oldCA, err := parseCerts(first[KeyCACert])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundle[0].Equal(oldCA[0])).To(BeFalse(), "a new CA signs first")
	g.Expect(bundle[1].Equal(oldCA[0])).To(BeTrue(), "the old CA stays in the bundle")

	// Once the old CA expired, the next serving renewal drops it from the bundle.
	now = t0.Add(10*year + day)
	d = assess(rotated, p, now)
	g.Expect(d.action).To(Equal(renewServing), d.reason)
	pruned, err := issue(d, p, now)
	g.Expect(err).NotTo(HaveOccurred())
	bundle, err = parseCerts(pruned[KeyCACert])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundle).To(HaveLen(1))
	g.Expect(pruned[KeyCAKey]).To(Equal(rotated[KeyCAKey]))
}
