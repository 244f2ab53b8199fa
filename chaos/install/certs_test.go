package install

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func mustGenerate(t *testing.T, ns string, at time.Time) *certificates {
	t.Helper()
	c, err := generateCertificates(ns, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustParse(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGeneratedCertificates(t *testing.T) {
	g := NewWithT(t)
	c := mustGenerate(t, "chaos-x", now)
	g.Expect(c.check("chaos-x", now)).To(Succeed())

	ca := mustParse(t, c.CA)
	g.Expect(ca.IsCA).To(BeTrue())
	g.Expect(ca.Subject.CommonName).To(Equal(caCommonName))

	tests := []struct {
		name     string
		pair     keyPair
		cn       string
		dnsNames []string
		usage    x509.ExtKeyUsage
	}{
		{"webhook", c.Webhook, "chaos-mesh-controller-manager.chaos-x.svc", []string{
			"chaos-mesh-controller-manager.chaos-x.svc", "chaos-mesh-controller-manager.chaos-x.svc.cluster.local",
			"chaos-mesh-controller-manager.chaos-x", "chaos-mesh-controller-manager",
		}, x509.ExtKeyUsageServerAuth},
		{"daemon server", c.DaemonServer, "chaos-daemon.chaos-mesh.org", []string{"chaos-daemon.chaos-mesh.org", "localhost"}, x509.ExtKeyUsageServerAuth},
		{"daemon client", c.DaemonClient, "controller-manager.chaos-mesh.org", []string{"controller-manager.chaos-mesh.org", "localhost"}, x509.ExtKeyUsageClientAuth},
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cert := mustParse(t, tt.pair.Cert)
			g.Expect(cert.Subject.CommonName).To(Equal(tt.cn))
			g.Expect(cert.DNSNames).To(Equal(tt.dnsNames))
			g.Expect(cert.ExtKeyUsage).To(Equal([]x509.ExtKeyUsage{tt.usage}))
			g.Expect(cert.IsCA).To(BeFalse())
			g.Expect(cert.NotAfter.Sub(now)).To(BeNumerically("~", CertificateValidity, time.Second))
			for _, name := range tt.dnsNames {
				_, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
				g.Expect(err).NotTo(HaveOccurred(), name)
			}
			block, _ := pem.Decode(tt.pair.Key)
			g.Expect(block.Type).To(Equal("PRIVATE KEY"))
		})
	}
}

// TestHandshakes runs the daemon handshake the way upstream configures both
// ends (pkg/chaosdaemon/server.go and pkg/grpc/utils.go): TLS 1.3, the
// server requires a client certificate from the CA, the client checks the
// server name chaos-daemon.chaos-mesh.org. The webhook handshake is the API
// server's: the caBundle and the Service's DNS name.
func TestHandshakes(t *testing.T) {
	c := mustGenerate(t, "chaos-mesh", time.Now())
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CA) {
		t.Fatal("CA does not parse")
	}
	pair := func(p keyPair) tls.Certificate {
		kp, err := tls.X509KeyPair(p.Cert, p.Key)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	other := mustGenerate(t, "chaos-mesh", time.Now())
	tests := []struct {
		name    string
		server  *tls.Config
		client  *tls.Config
		wantErr bool
	}{
		{
			name:   "daemon mTLS",
			server: &tls.Config{Certificates: []tls.Certificate{pair(c.DaemonServer)}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13},
			client: &tls.Config{Certificates: []tls.Certificate{pair(c.DaemonClient)}, RootCAs: pool, ServerName: DaemonServerName, MinVersion: tls.VersionTLS13},
		},
		{
			name:    "daemon rejects a client of another CA",
			server:  &tls.Config{Certificates: []tls.Certificate{pair(c.DaemonServer)}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13},
			client:  &tls.Config{Certificates: []tls.Certificate{pair(other.DaemonClient)}, RootCAs: pool, ServerName: DaemonServerName, MinVersion: tls.VersionTLS13},
			wantErr: true,
		},
		{
			name:   "webhook by its Service name",
			server: &tls.Config{Certificates: []tls.Certificate{pair(c.Webhook)}},
			client: &tls.Config{RootCAs: pool, ServerName: "chaos-mesh-controller-manager.chaos-mesh.svc"},
		},
		{
			name:    "webhook under another namespace's name",
			server:  &tls.Config{Certificates: []tls.Certificate{pair(c.Webhook)}},
			client:  &tls.Config{RootCAs: pool, ServerName: "chaos-mesh-controller-manager.other.svc"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			sc, cc := net.Pipe()
			defer func() { _ = sc.Close() }()
			defer func() { _ = cc.Close() }()
			serverErr := make(chan error, 1)
			go func() {
				s := tls.Server(sc, tt.server)
				err := s.HandshakeContext(t.Context())
				if err == nil {
					// TLS 1.3 clients see the server's verdict on their
					// certificate only when they read.
					_, err = s.Write([]byte("ok"))
				}
				serverErr <- err
				_ = sc.Close()
			}()
			cl := tls.Client(cc, tt.client)
			err := cl.HandshakeContext(t.Context())
			if err == nil {
				_, err = cl.Read(make([]byte, 2))
			}
			sErr := <-serverErr
			if tt.wantErr {
				g.Expect(err != nil || sErr != nil).To(BeTrue(), "handshake should fail")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sErr).NotTo(HaveOccurred())
		})
	}
}

func TestCheck(t *testing.T) {
	good := mustGenerate(t, "chaos-mesh", now)
	other := mustGenerate(t, "chaos-mesh", now)
	with := func(f func(c *certificates)) *certificates {
		c := *good
		f(&c)
		return &c
	}
	tests := []struct {
		name    string
		certs   *certificates
		ns      string
		at      time.Time
		wantErr string
	}{
		{name: "valid", certs: good, ns: "chaos-mesh", at: now},
		{name: "valid until the renewal window", certs: good, ns: "chaos-mesh", at: now.Add(CertificateValidity - RenewBefore - time.Hour)},
		{name: "within the renewal window", certs: good, ns: "chaos-mesh", at: now.Add(CertificateValidity - RenewBefore + time.Hour), wantErr: "CA: expires"},
		{name: "expired", certs: good, ns: "chaos-mesh", at: now.Add(CertificateValidity + time.Hour), wantErr: "expires"},
		{name: "not yet valid", certs: good, ns: "chaos-mesh", at: now.Add(-2 * time.Hour), wantErr: "not valid before"},
		{name: "another namespace", certs: good, ns: "elsewhere", at: now, wantErr: "webhook certificate: x509: certificate is valid for"},
		{name: "leaf of another CA", certs: with(func(c *certificates) { c.DaemonServer = other.DaemonServer }), ns: "chaos-mesh", at: now, wantErr: "daemon server certificate: x509: certificate signed by unknown authority"},
		{name: "key of another pair", certs: with(func(c *certificates) { c.DaemonClient.Key = other.DaemonClient.Key }), ns: "chaos-mesh", at: now, wantErr: "daemon client certificate: tls: private key does not match"},
		{name: "client pair as server", certs: with(func(c *certificates) { c.DaemonServer = c.DaemonClient }), ns: "chaos-mesh", at: now, wantErr: "daemon server certificate: x509:"},
		{name: "leaf as CA", certs: with(func(c *certificates) { c.CA = c.Webhook.Cert }), ns: "chaos-mesh", at: now, wantErr: "CA: not a CA"},
		{name: "garbage", certs: with(func(c *certificates) { c.CA = []byte("nope") }), ns: "chaos-mesh", at: now, wantErr: "CA: no PEM certificate"},
		{name: "missing key", certs: with(func(c *certificates) { c.Webhook.Key = nil }), ns: "chaos-mesh", at: now, wantErr: "webhook certificate: tls:"},
		{name: "nil", certs: nil, ns: "chaos-mesh", at: now, wantErr: "no certificates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tt.certs.check(tt.ns, tt.at)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestFingerprint(t *testing.T) {
	g := NewWithT(t)
	a, b := mustGenerate(t, "chaos-mesh", now), mustGenerate(t, "chaos-mesh", now)
	g.Expect(a.fingerprint()).To(Equal(a.fingerprint()))
	g.Expect(a.fingerprint()).To(HaveLen(16))
	g.Expect(a.fingerprint()).NotTo(Equal(b.fingerprint()))
}

// TestEnsureCertificates is the reuse logic against stored Secrets: valid
// ones are kept byte for byte (so a rerun applies identical Secrets and
// rolls nothing), anything else is replaced by a fresh set.
func TestEnsureCertificates(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	stored := mustGenerate(t, "chaos-mesh", now)
	other := mustGenerate(t, "chaos-mesh", now)
	secrets := func(c *certificates, mutate func(s []*corev1.Secret) []*corev1.Secret) []client.Object {
		s := c.secrets("chaos-mesh")
		if mutate != nil {
			s = mutate(s)
		}
		var out []client.Object
		for _, x := range s {
			out = append(out, x)
		}
		return out
	}
	tests := []struct {
		name       string
		objects    []client.Object
		at         time.Time
		wantReused bool
		wantReason string
	}{
		{name: "nothing stored", wantReason: "Secret chaos-mesh-webhook-certs not found"},
		{name: "valid set", objects: secrets(stored, nil), at: now.Add(24 * time.Hour), wantReused: true},
		{name: "expiring", objects: secrets(stored, nil), at: now.Add(CertificateValidity - RenewBefore/2), wantReason: "CA: expires"},
		{name: "one Secret missing", objects: secrets(stored, func(s []*corev1.Secret) []*corev1.Secret { return s[:2] }),
			wantReason: "Secret chaos-mesh-daemon-client-certs not found"},
		{name: "Secrets from two CAs", objects: secrets(stored, func(s []*corev1.Secret) []*corev1.Secret {
			return append(s[:2], other.secrets("chaos-mesh")[2])
		}), wantReason: "Secret chaos-mesh-daemon-client-certs holds another CA than Secret chaos-mesh-webhook-certs"},
		{name: "tampered certificate", objects: secrets(stored, func(s []*corev1.Secret) []*corev1.Secret {
			s[1].Data[keyCert] = other.DaemonServer.Cert
			return s
		}), wantReason: "daemon server certificate: tls: private key does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			at := tt.at
			if at.IsZero() {
				at = now
			}
			c := framework.NewFakeClient(scheme, framework.FakeClientOptions{Objects: tt.objects})
			got, reused, reason, err := ensureCertificates(t.Context(), c, "chaos-mesh", at)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reused).To(Equal(tt.wantReused))
			g.Expect(got.check("chaos-mesh", at)).To(Succeed())
			if tt.wantReused {
				g.Expect(reason).To(BeEmpty())
				g.Expect(got).To(Equal(stored))
				return
			}
			g.Expect(reason).To(ContainSubstring(tt.wantReason))
			g.Expect(got.CA).NotTo(Equal(stored.CA))
		})
	}
}
