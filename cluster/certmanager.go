package cluster

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gauntlet-dev/gauntlet/cluster/pki"
)

// cert-manager's API group, and the annotation by which its CA injector
// fills an object's caBundle from a Certificate ("namespace/name").
const (
	CertManagerGroup = "cert-manager.io"
	InjectCAFrom     = CertManagerGroup + "/inject-ca-from"
)

// StandInForCertManager does for objs what cert-manager would, on a
// cluster without it: each Certificate becomes the Secret it names
// (spec.secretName, of type kubernetes.io/tls: tls.crt, tls.key and
// ca.crt), holding a certificate ca signs for its dnsNames; Issuers and
// ClusterIssuers go; and each object annotated InjectCAFrom with one of
// those Certificates gets ca's certificate as its caBundle (the webhooks
// of a webhook configuration, a CRD's conversion webhook, an APIService).
// An object with no namespace is in namespace. It returns the objects to
// apply, the Secrets first, and what it stood in for, one line each.
func StandInForCertManager(objs []*unstructured.Unstructured, ca *pki.CA, namespace string) ([]*unstructured.Unstructured, []string, error) {
	var secrets, rest []*unstructured.Unstructured
	var did []string
	issued := map[string]bool{}
	nsOf := func(u *unstructured.Unstructured) string {
		if ns := u.GetNamespace(); ns != "" {
			return ns
		}
		return namespace
	}
	for _, u := range objs {
		if u.GroupVersionKind().Group != CertManagerGroup {
			rest = append(rest, u)
			continue
		}
		if u.GetKind() != "Certificate" {
			continue // Issuer, ClusterIssuer: nothing issues but ca
		}
		s, err := certificateSecret(u, ca, nsOf(u))
		if err != nil {
			return nil, nil, fmt.Errorf("cert-manager Certificate %s: %w", path.Join(nsOf(u), u.GetName()), err)
		}
		secrets = append(secrets, s)
		issued[nsOf(u)+"/"+u.GetName()] = true
		did = append(did, fmt.Sprintf("Certificate %s/%s as Secret %s", nsOf(u), u.GetName(), s.GetName()))
	}
	bundle := base64.StdEncoding.EncodeToString(ca.PEM)
	for _, u := range rest {
		from := u.GetAnnotations()[InjectCAFrom]
		if from == "" {
			continue
		}
		if !issued[from] {
			return nil, nil, fmt.Errorf("%s %s: %s names %s, which is no Certificate of the manifests", u.GetKind(), u.GetName(), InjectCAFrom, from)
		}
		n, err := injectCABundle(u, bundle)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		did = append(did, fmt.Sprintf("the CA of %s injected into %s %s (%d caBundles)", from, u.GetKind(), u.GetName(), n))
	}
	return append(secrets, rest...), did, nil
}

// certificateSecret is the Secret a Certificate names, with a serving
// and client certificate for its dnsNames (or its commonName).
func certificateSecret(u *unstructured.Unstructured, ca *pki.CA, namespace string) (*unstructured.Unstructured, error) {
	name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName")
	if name == "" {
		return nil, fmt.Errorf("no spec.secretName")
	}
	dns, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "dnsNames")
	cn, _, _ := unstructured.NestedString(u.Object, "spec", "commonName")
	switch {
	case cn == "" && len(dns) > 0:
		cn = dns[0]
	case cn == "":
		return nil, fmt.Errorf("neither spec.dnsNames nor spec.commonName: no name to issue for")
	}
	if len(dns) == 0 {
		dns = []string{cn}
	}
	pair, err := ca.Issue(cn, dns, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{CertManagerGroup + "/certificate-name": u.GetName()}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: pair.Cert, corev1.TLSPrivateKeyKey: pair.Key, "ca.crt": ca.PEM},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// injectCABundle sets bundle as u's caBundle where cert-manager's injector
// would, and says how many it set.
func injectCABundle(u *unstructured.Unstructured, bundle string) (int, error) {
	switch kind := u.GetKind(); {
	case strings.HasSuffix(kind, "WebhookConfiguration"):
		webhooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
		if err != nil {
			return 0, err
		}
		for _, w := range webhooks {
			if m, ok := w.(map[string]any); ok {
				if err := unstructured.SetNestedField(m, bundle, "clientConfig", "caBundle"); err != nil {
					return 0, err
				}
			}
		}
		return len(webhooks), unstructured.SetNestedSlice(u.Object, webhooks, "webhooks")
	case kind == "CustomResourceDefinition":
		if _, found, _ := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook", "clientConfig"); !found {
			return 0, nil
		}
		return 1, unstructured.SetNestedField(u.Object, bundle, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	case kind == "APIService":
		return 1, unstructured.SetNestedField(u.Object, bundle, "spec", "caBundle")
	}
	return 0, fmt.Errorf("%s is annotated, but cert-manager injects no CA into a %s", InjectCAFrom, u.GetKind())
}
