package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the certificate Secret's data. The Secret has type kubernetes.io/tls.
const (
	// KeyTLSCert holds the PEM serving certificate.
	KeyTLSCert = corev1.TLSCertKey
	// KeyTLSKey holds the PEM (PKCS#8) private key of the serving certificate.
	KeyTLSKey = corev1.TLSPrivateKeyKey
	// KeyCACert holds the trust bundle injected as caBundle: the signing CA
	// first, then the previous CA for as long as it is valid, so that replicas
	// still serving a certificate from before a CA rotation stay trusted.
	KeyCACert = "ca.crt"
	// KeyCAKey holds the PEM (PKCS#8) private key of the signing CA.
	KeyCAKey = "ca.key"
)

// backdate is how far before "now" certificates become valid, so that a
// replica or API server whose clock is slightly behind accepts them.
const backdate = time.Hour

// action is what a Secret's content calls for.
type action int

const (
	// keep: the content is valid and not due for renewal.
	keep action = iota
	// renewServing: the CA is fine; issue a new serving certificate with it.
	renewServing
	// renewAll: the CA is missing, invalid or near expiry; issue a new CA and
	// a new serving certificate.
	renewAll
)

func (a action) String() string {
	switch a {
	case keep:
		return "keep"
	case renewServing:
		return "renew serving certificate"
	case renewAll:
		return "renew CA and serving certificate"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// policy is what the certificates must satisfy.
type policy struct {
	// commonName is the subject of the serving certificate, and the prefix of
	// the CA's.
	commonName string
	// dnsNames are the serving certificate's DNS names, exactly.
	dnsNames []string
	// caValidity and certValidity are the lifetimes of new certificates.
	caValidity, certValidity time.Duration
	// renewBefore renews the serving certificate when less than this is left;
	// zero means a third of its lifetime.
	renewBefore time.Duration
}

// authority is a parsed CA with its key and the trust bundle it came in.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
	// trust is the whole bundle of ca.crt, cert first.
	trust []*x509.Certificate
}

// decision is the verdict of assess on a Secret's data.
type decision struct {
	action action
	// reason says why, for logs; empty when action is keep.
	reason string
	// ca is the current CA when it parsed; nil otherwise. With renewAll it is
	// the outgoing CA, kept in the new trust bundle while it is valid.
	ca *authority
}

// assess decides whether data (a Secret's data, possibly nil) holds a valid
// CA and serving certificate for p at time now.
func assess(data map[string][]byte, p policy, now time.Time) decision {
	ca, err := parseAuthority(data[KeyCACert], data[KeyCAKey])
	if err != nil {
		return decision{action: renewAll, reason: fmt.Sprintf("CA: %v", err)}
	}
	switch left := ca.cert.NotAfter.Sub(now); {
	case now.Before(ca.cert.NotBefore):
		return decision{action: renewAll, reason: fmt.Sprintf("CA: not valid before %s", ca.cert.NotBefore.UTC().Format(time.RFC3339)), ca: ca}
	case left < caRenewBefore(ca.cert, p):
		return decision{action: renewAll, reason: fmt.Sprintf("CA: expires at %s", ca.cert.NotAfter.UTC().Format(time.RFC3339)), ca: ca}
	}

	pair, err := tls.X509KeyPair(data[KeyTLSCert], data[KeyTLSKey])
	if err != nil {
		return decision{action: renewServing, reason: fmt.Sprintf("serving certificate: %v", err), ca: ca}
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return decision{action: renewServing, reason: fmt.Sprintf("serving certificate: %v", err), ca: ca}
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return decision{action: renewServing, reason: fmt.Sprintf("serving certificate: %v", err), ca: ca}
	}
	if got, want := slices.Sorted(slices.Values(leaf.DNSNames)), slices.Sorted(slices.Values(p.dnsNames)); !slices.Equal(got, want) {
		return decision{action: renewServing, reason: fmt.Sprintf("serving certificate: DNS names %v, want %v", got, want), ca: ca}
	}
	if left := leaf.NotAfter.Sub(now); left < certRenewBefore(leaf, p) {
		return decision{action: renewServing, reason: fmt.Sprintf("serving certificate: expires at %s", leaf.NotAfter.UTC().Format(time.RFC3339)), ca: ca}
	}
	return decision{action: keep, ca: ca}
}

// caRenewBefore is how much validity a CA must have left: a third of its
// lifetime, and at least a full serving certificate's validity, so that every
// serving certificate it signs gets the full lifetime.
func caRenewBefore(ca *x509.Certificate, p policy) time.Duration {
	return max(ca.NotAfter.Sub(ca.NotBefore)/3, p.certValidity)
}

// certRenewBefore is how much validity a serving certificate must have left.
func certRenewBefore(leaf *x509.Certificate, p policy) time.Duration {
	if p.renewBefore > 0 {
		return p.renewBefore
	}
	return leaf.NotAfter.Sub(leaf.NotBefore) / 3
}

// issue carries out d at time now and returns the Secret data to write: a
// new serving certificate, signed by d.ca for renewServing or by a new CA for
// renewAll.
func issue(d decision, p policy, now time.Time) (map[string][]byte, error) {
	var ca *authority
	switch d.action {
	case renewServing:
		kept := *d.ca
		ca = &kept
		// Drop expired certificates from the trust bundle; keep the rest.
		ca.certPEM = encodeCerts(slices.DeleteFunc(slices.Clone(ca.trust), func(c *x509.Certificate) bool {
			return c != ca.cert && !now.Before(c.NotAfter)
		}))
	case renewAll:
		var err error
		if ca, err = newAuthority(p, now); err != nil {
			return nil, err
		}
		if d.ca != nil && now.Before(d.ca.cert.NotAfter) {
			ca.certPEM = append(ca.certPEM, encodeCerts([]*x509.Certificate{d.ca.cert})...)
		}
	default:
		return nil, fmt.Errorf("nothing to issue for action %q", d.action)
	}
	certPEM, keyPEM, err := newServingCert(ca, p, now)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		KeyCACert:  ca.certPEM,
		KeyCAKey:   ca.keyPEM,
		KeyTLSCert: certPEM,
		KeyTLSKey:  keyPEM,
	}, nil
}

// newAuthority generates a self-signed ECDSA P-256 CA valid for p.caValidity.
func newAuthority(p policy, now time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", p.commonName, now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(p.caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the new CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &authority{
		cert:    cert,
		key:     key,
		certPEM: encodeCerts([]*x509.Certificate{cert}),
		keyPEM:  keyPEM,
		trust:   []*x509.Certificate{cert},
	}, nil
}

// newServingCert generates an ECDSA P-256 serving certificate for
// p.dnsNames signed by ca, valid for p.certValidity but never past the CA.
func newServingCert(ca *authority, p policy, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the serving key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: p.commonName},
		DNSNames:     slices.Clone(p.dnsNames),
		NotBefore:    now.Add(-backdate),
		NotAfter:     minTime(now.Add(p.certValidity), ca.cert.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// parseAuthority parses a trust bundle (signing CA first) and the CA's key,
// and checks that they belong together.
func parseAuthority(certPEM, keyPEM []byte) (*authority, error) {
	trust, err := parseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCACert, err)
	}
	ca := trust[0]
	if !ca.IsCA || !ca.BasicConstraintsValid {
		return nil, fmt.Errorf("%s: the first certificate is not a CA", KeyCACert)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCAKey, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, fmt.Errorf("%s does not match the certificate in %s", KeyCAKey, KeyCACert)
	}
	return &authority{cert: ca, key: key, certPEM: certPEM, keyPEM: keyPEM, trust: trust}, nil
}

// parseCerts parses one or more PEM certificates; anything else is an error.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := bytes.TrimSpace(data)
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("not PEM")
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
		rest = bytes.TrimSpace(rest)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return certs, nil
}

// parseKey parses a PEM PKCS#8 or SEC 1 (EC) private key.
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	return signer, nil
}

func encodeCerts(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		// Encoding to a bytes.Buffer cannot fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return serial, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
