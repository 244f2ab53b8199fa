package cluster

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/cluster/pki"
)

// kubebuilder's config/default with its webhook and cert-manager on.
const certManagerManifests = `
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned-issuer, namespace: op-system}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: serving-cert, namespace: op-system}
spec:
  dnsNames: [op-webhook-service.op-system.svc, op-webhook-service.op-system.svc.cluster.local]
  issuerRef: {kind: Issuer, name: selfsigned-issuer}
  secretName: webhook-server-cert
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: op-validating-webhook-configuration
  annotations: {cert-manager.io/inject-ca-from: op-system/serving-cert}
webhooks:
  - name: vcache.example.com
    clientConfig: {service: {name: op-webhook-service, namespace: op-system, path: /validate}}
  - name: vother.example.com
    clientConfig: {service: {name: op-webhook-service, namespace: op-system, path: /validate-other}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: caches.example.com
  annotations: {cert-manager.io/inject-ca-from: op-system/serving-cert}
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig: {service: {name: op-webhook-service, namespace: op-system, path: /convert}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: op-controller-manager, namespace: op-system}
`

func decodeAll(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// The Certificate becomes its Secret, signed by the CA that is injected
// wherever cert-manager's injector would put it; the Issuer goes.
func TestStandInForCertManager(t *testing.T) {
	g := NewWithT(t)
	ca, err := pki.NewCA("test-ca", time.Now(), time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	out, did, err := StandInForCertManager(decodeAll(t, certManagerManifests), ca, "op-system")
	g.Expect(err).NotTo(HaveOccurred())
	var kinds []string
	for _, u := range out {
		kinds = append(kinds, u.GetKind())
	}
	g.Expect(kinds).To(Equal([]string{"Secret", "ValidatingWebhookConfiguration", "CustomResourceDefinition", "Deployment"}))
	g.Expect(did).To(Equal([]string{
		"Certificate op-system/serving-cert as Secret webhook-server-cert",
		"the CA of op-system/serving-cert injected into ValidatingWebhookConfiguration op-validating-webhook-configuration (2 caBundles)",
		"the CA of op-system/serving-cert injected into CustomResourceDefinition caches.example.com (1 caBundles)",
	}))

	secret := out[0]
	g.Expect(secret.GetName()).To(Equal("webhook-server-cert"))
	g.Expect(secret.GetNamespace()).To(Equal("op-system"))
	g.Expect(secret.Object["type"]).To(Equal("kubernetes.io/tls"))
	data := func(key string) []byte {
		s, _, _ := unstructured.NestedString(secret.Object, "data", key)
		b, err := base64.StdEncoding.DecodeString(s)
		g.Expect(err).NotTo(HaveOccurred(), key)
		return b
	}
	g.Expect(data("ca.crt")).To(Equal(ca.PEM))
	g.Expect(data("tls.key")).To(ContainSubstring("PRIVATE KEY"))
	block, _ := pem.Decode(data("tls.crt"))
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(ca.PEM)).To(BeTrue())
	_, err = cert.Verify(x509.VerifyOptions{DNSName: "op-webhook-service.op-system.svc", Roots: roots})
	g.Expect(err).NotTo(HaveOccurred(), "the API server reaches the webhook's Service by this name")

	bundle := base64.StdEncoding.EncodeToString(ca.PEM)
	webhooks, _, _ := unstructured.NestedSlice(out[1].Object, "webhooks")
	for _, w := range webhooks {
		got, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "caBundle")
		g.Expect(got).To(Equal(bundle))
	}
	got, _, _ := unstructured.NestedString(out[2].Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	g.Expect(got).To(Equal(bundle))
}

// An injection from a Certificate the manifests do not hold, or a
// Certificate with nowhere to go, is refused with the object's name.
func TestStandInForCertManagerRefuses(t *testing.T) {
	g := NewWithT(t)
	ca, err := pki.NewCA("test-ca", time.Now(), time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	objs := decodeAll(t, certManagerManifests)
	objs[2].SetAnnotations(map[string]string{InjectCAFrom: "op-system/other-cert"})
	_, _, err = StandInForCertManager(objs, ca, "op-system")
	g.Expect(err).To(MatchError(ContainSubstring("ValidatingWebhookConfiguration op-validating-webhook-configuration: cert-manager.io/inject-ca-from names op-system/other-cert, which is no Certificate of the manifests")))

	objs = decodeAll(t, certManagerManifests)
	unstructured.RemoveNestedField(objs[1].Object, "spec", "secretName")
	_, _, err = StandInForCertManager(objs, ca, "op-system")
	g.Expect(err).To(MatchError("cert-manager Certificate op-system/serving-cert: no spec.secretName"))
}
