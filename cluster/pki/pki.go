// Package pki issues the certificates a cluster's components are served
// with when no certificate manager is there to do it: one CA, and the
// leaves it signs for the names a Service is reached by. Keys are ECDSA
// P-256; certificates and keys are PEM (keys PKCS #8), as Secrets of type
// kubernetes.io/tls carry them.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"
)

// skew is how far before now a certificate is valid from: a node's clock
// may be behind this machine's.
const skew = time.Hour

// KeyPair is a PEM certificate and its PEM (PKCS #8) private key.
type KeyPair struct {
	Cert, Key []byte
}

// CA signs leaves. Its key lives only as long as the CA value: what needs
// re-issuing is issued again from a new CA.
type CA struct {
	// PEM is the CA's certificate, for a caBundle or a ca.crt.
	PEM []byte

	cert                *x509.Certificate
	key                 crypto.Signer
	notBefore, notAfter time.Time
}

// NewCA makes a CA named commonName, valid from now (less skew) for
// validity; the leaves it issues are valid as long.
func NewCA(commonName string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &CA{key: key, notBefore: now.Add(-skew), notAfter: now.Add(validity)}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"gauntlet"}},
		NotBefore:             ca.notBefore,
		NotAfter:              ca.notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := sign(tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	ca.PEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return ca, nil
}

// Issue signs a leaf named commonName for dnsNames, for usage (server
// or client authentication).
func (ca *CA) Issue(commonName string, dnsNames []string, usage x509.ExtKeyUsage) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	der, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		NotBefore:   ca.notBefore,
		NotAfter:    ca.notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return KeyPair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}
