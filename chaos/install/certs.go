package install

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/cluster/pki"
)

// Names of the Secrets that hold the certificates, as upstream's chart
// names them (the controller and the daemon mount them).
const (
	WebhookSecret      = "chaos-mesh-webhook-certs"
	DaemonSecret       = "chaos-mesh-daemon-certs"
	DaemonClientSecret = "chaos-mesh-daemon-client-certs"
)

// Keys inside each certificate Secret.
const (
	keyCA   = "ca.crt"
	keyCert = "tls.crt"
	keyKey  = "tls.key"
)

// Subject names the controller and the daemon check. The controller dials
// the daemon by pod IP and verifies the name DaemonServerName
// (pkg/grpc.ChaosDaemonServerName upstream); the daemon requires a client
// certificate signed by the same CA, whatever its name.
const (
	DaemonServerName = "chaos-daemon.chaos-mesh.org"
	DaemonClientName = "controller-manager.chaos-mesh.org"
	caCommonName     = "chaos-mesh-ca"
)

// Validity of the generated certificates, and how long before expiry an
// Install replaces them.
const (
	CertificateValidity = 5 * 365 * 24 * time.Hour
	RenewBefore         = 30 * 24 * time.Hour
)

// keyPair is a PEM certificate and its PEM (PKCS #8) private key.
type keyPair = pki.KeyPair

// certificates are everything Chaos Mesh needs: one CA, the admission
// webhook's serving certificate, and the mutual-TLS pair of the gRPC link
// between the controller (client) and the daemons (server).
type certificates struct {
	// CA is the PEM certificate of the CA that signed the three pairs. Its
	// key is not kept: when anything needs re-issuing, everything is.
	CA           []byte
	Webhook      keyPair
	DaemonServer keyPair
	DaemonClient keyPair
}

// WebhookServiceNames are the DNS names the API server may use to reach the
// webhook Service in namespace ns.
func WebhookServiceNames(ns string) []string {
	return []string{
		ControllerService + "." + ns + ".svc",
		ControllerService + "." + ns + ".svc.cluster.local",
		ControllerService + "." + ns,
		ControllerService,
	}
}

// generateCertificates makes a fresh CA and the three pairs it signs, valid
// from now (minus an hour, for clock skew) for CertificateValidity.
func generateCertificates(ns string, now time.Time) (*certificates, error) {
	ca, err := pki.NewCA(caCommonName, now, CertificateValidity)
	if err != nil {
		return nil, err
	}
	c := &certificates{CA: ca.PEM}
	webhookNames := WebhookServiceNames(ns)
	if c.Webhook, err = ca.Issue(webhookNames[0], webhookNames, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if c.DaemonServer, err = ca.Issue(DaemonServerName, []string{DaemonServerName, "localhost"}, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if c.DaemonClient, err = ca.Issue(DaemonClientName, []string{DaemonClientName, "localhost"}, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	return c, nil
}

// check says why c cannot serve namespace ns until now+RenewBefore, or nil
// when it can: every pair parses and matches its key, chains to the CA with
// the right usage and name, and none of them (nor the CA) expires within
// RenewBefore.
func (c *certificates) check(ns string, now time.Time) error {
	if c == nil {
		return errors.New("no certificates")
	}
	ca, err := parseCert(c.CA)
	if err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	if !ca.IsCA {
		return errors.New("CA: not a CA certificate")
	}
	if err := validFor(ca, now); err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, p := range []struct {
		what  string
		pair  keyPair
		name  string
		usage x509.ExtKeyUsage
	}{
		{"webhook certificate", c.Webhook, WebhookServiceNames(ns)[0], x509.ExtKeyUsageServerAuth},
		{"daemon server certificate", c.DaemonServer, DaemonServerName, x509.ExtKeyUsageServerAuth},
		{"daemon client certificate", c.DaemonClient, DaemonClientName, x509.ExtKeyUsageClientAuth},
	} {
		if _, err := tls.X509KeyPair(p.pair.Cert, p.pair.Key); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		cert, err := parseCert(p.pair.Cert)
		if err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		if err := validFor(cert, now); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{
			DNSName: p.name, Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{p.usage},
		}); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
	}
	return nil
}

// fingerprint identifies the set (a SHA-256 over every certificate): pod
// templates carry it, so that new certificates roll the pods that load
// them at start.
func (c *certificates) fingerprint() string {
	h := sha256.New()
	for _, b := range [][]byte{c.CA, c.Webhook.Cert, c.DaemonServer.Cert, c.DaemonClient.Cert} {
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("more than one PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}

func validFor(cert *x509.Certificate, now time.Time) error {
	switch {
	case now.Before(cert.NotBefore):
		return fmt.Errorf("not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	case now.Add(RenewBefore).After(cert.NotAfter):
		return fmt.Errorf("expires %s, within %s", cert.NotAfter.UTC().Format(time.RFC3339), RenewBefore)
	}
	return nil
}

// secrets are the three Secrets that carry c in namespace ns, as the
// controller and the daemon mount them.
func (c *certificates) secrets(ns string) []*corev1.Secret {
	secret := func(name string, p keyPair) *corev1.Secret {
		return &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: commonLabels("certificates")},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{keyCA: c.CA, keyCert: p.Cert, keyKey: p.Key},
		}
	}
	return []*corev1.Secret{
		secret(WebhookSecret, c.Webhook),
		secret(DaemonSecret, c.DaemonServer),
		secret(DaemonClientSecret, c.DaemonClient),
	}
}

// readCertificates reads the certificates an earlier Install stored in
// namespace ns. It returns nil and the reason when they are not there as a
// set: a Secret is missing, or the Secrets do not share one CA (the daemon
// and the controller would then reject each other).
func readCertificates(ctx context.Context, r client.Reader, ns string) (*certificates, string, error) {
	c := &certificates{}
	for _, s := range []struct {
		name string
		pair *keyPair
	}{{WebhookSecret, &c.Webhook}, {DaemonSecret, &c.DaemonServer}, {DaemonClientSecret, &c.DaemonClient}} {
		secret := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.name}, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "Secret " + s.name + " not found", nil
			}
			return nil, "", fmt.Errorf("reading Secret %s/%s: %w", ns, s.name, err)
		}
		if c.CA == nil {
			c.CA = secret.Data[keyCA]
		} else if !bytes.Equal(c.CA, secret.Data[keyCA]) {
			return nil, "Secret " + s.name + " holds another CA than Secret " + WebhookSecret, nil
		}
		s.pair.Cert, s.pair.Key = secret.Data[keyCert], secret.Data[keyKey]
	}
	return c, "", nil
}

// ensureCertificates returns the stored certificates when they are still
// good for namespace ns (reused), or a fresh set and why the stored ones
// could not be reused.
func ensureCertificates(ctx context.Context, r client.Reader, ns string, now time.Time) (c *certificates, reused bool, reason string, err error) {
	stored, problem, err := readCertificates(ctx, r, ns)
	if err != nil {
		return nil, false, "", err
	}
	if stored != nil {
		cerr := stored.check(ns, now)
		if cerr == nil {
			return stored, true, "", nil
		}
		problem = cerr.Error()
	}
	c, err = generateCertificates(ns, now)
	return c, false, problem, err
}
