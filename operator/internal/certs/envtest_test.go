package certs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// apiClient talks to the package's envtest API server directly (no cache);
// nil when KUBEBUILDER_ASSETS is not set.
var apiClient client.WithWatch

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return m.Run()
	}
	// Components such as the certwatcher log through the global logger.
	ctrl.SetLogger(logr.Discard())
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest from %s: %v\n", assets, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if apiClient, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintf(os.Stderr, "creating a client: %v\n", err)
		return 1
	}
	return m.Run()
}

// fixture is a fresh namespace with a ValidatingWebhookConfiguration of two
// webhooks pointing at a Service in it.
type fixture struct {
	ctx    context.Context
	c      client.Client
	ns     string
	vwc    string
	svc    string
	secret client.ObjectKey
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if apiClient == nil {
		t.Skip("KUBEBUILDER_ASSETS is not set: run through `make test-int`, which builds the envtest binaries first")
	}
	g := NewWithT(t)
	ctx := ctrl.LoggerInto(t.Context(), testr.New(t))
	cleanupCtx := context.WithoutCancel(ctx)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "certs-"}}
	g.Expect(apiClient.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() { _ = apiClient.Delete(cleanupCtx, ns) })

	svc := "webhook-service"
	hook := func(name string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: ns.Name, Name: svc, Path: ptr.To("/validate"),
			}},
			// Nothing ever matches: the API server never calls the missing Service.
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"certs.test.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("one.certs.test"), hook("two.certs.test")},
	}
	g.Expect(apiClient.Create(ctx, vwc)).To(Succeed())
	t.Cleanup(func() { _ = apiClient.Delete(cleanupCtx, vwc) })

	return &fixture{ctx: ctx, c: apiClient, ns: ns.Name, vwc: vwc.Name, svc: svc, secret: client.ObjectKey{Namespace: ns.Name, Name: "webhook-cert"}}
}

func (f *fixture) options(t *testing.T) Options {
	return Options{
		Namespace: f.ns, SecretName: f.secret.Name, ServiceName: f.svc,
		CertDir: t.TempDir(), WebhookConfigurations: []string{f.vwc},
	}
}

func (f *fixture) manager(t *testing.T, o Options) *Manager {
	t.Helper()
	m, err := New(f.c, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func (f *fixture) getSecret(g Gomega) *corev1.Secret {
	var s corev1.Secret
	g.Expect(f.c.Get(f.ctx, f.secret, &s)).To(Succeed())
	return &s
}

func (f *fixture) getVWC(g Gomega) *admissionregistrationv1.ValidatingWebhookConfiguration {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	g.Expect(f.c.Get(f.ctx, client.ObjectKey{Name: f.vwc}, &vwc)).To(Succeed())
	return &vwc
}

// expectConsistent checks that the files, the Secret and every caBundle
// agree, and returns the Secret.
func (f *fixture) expectConsistent(g Gomega, certDir string) *corev1.Secret {
	s := f.getSecret(g)
	g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
	g.Expect(s.Data).To(HaveKey(KeyCAKey))
	g.Expect(os.ReadFile(filepath.Join(certDir, KeyTLSCert))).To(Equal(s.Data[KeyTLSCert]))
	g.Expect(os.ReadFile(filepath.Join(certDir, KeyTLSKey))).To(Equal(s.Data[KeyTLSKey]))
	vwc := f.getVWC(g)
	g.Expect(vwc.Webhooks).To(HaveLen(2))
	for _, w := range vwc.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(Equal(s.Data[KeyCACert]), "caBundle of %s", w.Name)
	}
	return s
}

func statFiles(g Gomega, dir string) map[string]os.FileInfo {
	out := map[string]os.FileInfo{}
	for _, name := range []string{KeyTLSCert, KeyTLSKey} {
		fi, err := os.Stat(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		out[name] = fi
	}
	return out
}

// conversionCRD creates a CRD in its own group whose conversion webhook
// points at the fixture's Service (never called: nothing is stored in it).
func (f *fixture) conversionCRD(t *testing.T, strategy apiextensionsv1.ConversionStrategyType) string {
	t.Helper()
	g := NewWithT(t)
	group := f.ns + ".certs.test"
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions:   []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), version("v1alpha1", false)},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: strategy},
		},
	}
	if strategy == apiextensionsv1.WebhookConverter {
		crd.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: f.ns, Name: f.svc, Path: ptr.To("/convert"),
			}},
			ConversionReviewVersions: []string{"v1"},
		}
	}
	g.Expect(f.c.Create(f.ctx, crd)).To(Succeed())
	t.Cleanup(func() { _ = f.c.Delete(context.WithoutCancel(f.ctx), crd) })
	return crd.Name
}
