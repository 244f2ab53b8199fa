package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

const (
	day  = 24 * time.Hour
	year = 365 * day
)

// ---- Pure PKI tests ----

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

func TestNewValidatesOptions(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	valid := func(mod func(*Options)) Options {
		o := Options{Namespace: "system", SecretName: "webhook-cert", ServiceName: "webhook-service", CertDir: "/tmp/certs", WebhookConfigurations: []string{"vwc"}}
		mod(&o)
		return o
	}
	cases := []struct {
		name string
		o    Options
		want []string
	}{
		{name: "empty", o: Options{}, want: []string{"Namespace is required", "SecretName is required", "ServiceName is required", "CertDir is required"}},
		{name: "bad names", o: valid(func(o *Options) { o.Namespace = "Sys_tem"; o.ServiceName = "1svc"; o.ClusterDomain = "a..b" }), want: []string{`Namespace "Sys_tem"`, `ServiceName "1svc"`, `ClusterDomain "a..b"`}},
		{name: "empty configuration name", o: valid(func(o *Options) { o.WebhookConfigurations = []string{"ok", ""} }), want: []string{"WebhookConfigurations[1] is required"}},
		{name: "negative", o: valid(func(o *Options) { o.CertValidity = -time.Hour }), want: []string{"CertValidity must not be negative"}},
		{name: "short CA", o: valid(func(o *Options) { o.CAValidity = 18 * 30 * day }), want: []string{"CAValidity (12960h0m0s) must be at least twice CertValidity (8760h0m0s)"}},
		{name: "RenewBefore too long", o: valid(func(o *Options) { o.RenewBefore = year }), want: []string{"RenewBefore (8760h0m0s) must be shorter than CertValidity"}},
		{name: "CheckInterval too long", o: valid(func(o *Options) { o.CertValidity = 3 * time.Hour; o.CAValidity = 6 * time.Hour }), want: []string{"CheckInterval (1h0m0s) must be shorter than the renewal window (1h0m0s)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := New(c, tc.o)
			g.Expect(err).To(HaveOccurred())
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	g := NewWithT(t)
	_, err := New(nil, valid(func(*Options) {}))
	g.Expect(err).To(MatchError(ContainSubstring("a client is required")))
	m, err := New(c, valid(func(*Options) {}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.opts.ClusterDomain).To(Equal("cluster.local"))
	g.Expect(m.opts.CAValidity).To(Equal(10 * year))
	g.Expect(m.opts.CertValidity).To(Equal(year))
	g.Expect(m.opts.CheckInterval).To(Equal(time.Hour))
	g.Expect(m.policy.dnsNames).To(ContainElement("webhook-service.system.svc.cluster.local"))
	g.Expect(m.NeedLeaderElection()).To(BeFalse())
	var readyz healthz.Checker = m.Checker
	g.Expect(readyz(nil)).To(MatchError(ContainSubstring("not provisioned yet")))
}

func TestWriteFileIfChanged(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "tls.key")
	changed, err := writeFileIfChanged(path, []byte("one"), 0o600)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	before, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	changed, err = writeFileIfChanged(path, []byte("one"), 0o600)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeFalse())
	after, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(before, after)).To(BeTrue(), "an unchanged file is not replaced")

	changed, err = writeFileIfChanged(path, []byte("two"), 0o600)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	g.Expect(os.ReadFile(path)).To(Equal([]byte("two")))
	entries, err := os.ReadDir(filepath.Dir(path))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "no temporary file is left behind")
}

// ---- Integration tests against a real API server (envtest) ----

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

func TestEnsureCreatesThenChangesNothing(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	o := f.options(t)
	m := f.manager(t, o)
	g.Expect(m.Checker(nil)).To(HaveOccurred(), "not ready before the first Ensure")

	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	g.Expect(m.Checker(nil)).To(Succeed())
	s := f.expectConsistent(g, o.CertDir)
	leaf := parseLeaf(t, s.Data)
	g.Expect(leaf.DNSNames).To(ConsistOf(f.svc, f.svc+"."+f.ns, f.svc+"."+f.ns+".svc", f.svc+"."+f.ns+".svc.cluster.local"))
	key, err := os.Stat(filepath.Join(o.CertDir, KeyTLSKey))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(key.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	files, vwcRV := statFiles(g, o.CertDir), f.getVWC(g).ResourceVersion
	for range 2 {
		g.Expect(m.Ensure(f.ctx)).To(Succeed())
	}
	g.Expect(f.getSecret(g).ResourceVersion).To(Equal(s.ResourceVersion), "the Secret is not rewritten")
	g.Expect(f.getVWC(g).ResourceVersion).To(Equal(vwcRV), "the configuration is not patched")
	for name, before := range statFiles(g, o.CertDir) {
		g.Expect(before.ModTime()).To(Equal(files[name].ModTime()), "mtime of %s", name)
		g.Expect(os.SameFile(before, files[name])).To(BeTrue(), "%s is not replaced", name)
	}

	// A second replica with an empty CertDir adopts the Secret as it is.
	o2 := f.options(t)
	g.Expect(f.manager(t, o2).Ensure(f.ctx)).To(Succeed())
	g.Expect(f.expectConsistent(g, o2.CertDir).ResourceVersion).To(Equal(s.ResourceVersion))
}

func TestEnsureRenewsServingCertThenCA(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	o := f.options(t)
	o.Clock = clk
	m := f.manager(t, o)

	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	first := f.expectConsistent(g, o.CertDir)

	// Nine months in, a third of the serving certificate's life is left: a
	// new one is issued by the same CA, and caBundle does not move.
	clk.Step(270 * day)
	vwcRV := f.getVWC(g).ResourceVersion
	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	renewed := f.expectConsistent(g, o.CertDir)
	g.Expect(renewed.ResourceVersion).NotTo(Equal(first.ResourceVersion))
	g.Expect(renewed.Data[KeyTLSCert]).NotTo(Equal(first.Data[KeyTLSCert]))
	g.Expect(renewed.Data[KeyCACert]).To(Equal(first.Data[KeyCACert]))
	g.Expect(renewed.Data[KeyCAKey]).To(Equal(first.Data[KeyCAKey]))
	g.Expect(f.getVWC(g).ResourceVersion).To(Equal(vwcRV), "caBundle is stable across a serving renewal")
	g.Expect(parseLeaf(t, renewed.Data).NotAfter).To(BeTemporally("~", clk.Now().Add(year), time.Second))

	// Seven years in, the CA has less than a third of its life left: a new
	// CA signs, and caBundle carries it (and the old CA while it is valid).
	clk.Step(7*year - 270*day)
	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	rotated := f.expectConsistent(g, o.CertDir)
	g.Expect(rotated.Data[KeyCAKey]).NotTo(Equal(first.Data[KeyCAKey]))
	g.Expect(rotated.Data[KeyCACert]).NotTo(Equal(first.Data[KeyCACert]))
	bundle, err := parseCerts(rotated.Data[KeyCACert])
	g.Expect(err).NotTo(HaveOccurred())
	oldCA, err := parseCerts(first.Data[KeyCACert])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundle).To(HaveLen(2))
	g.Expect(bundle[1].Equal(oldCA[0])).To(BeTrue(), "the outgoing CA stays trusted")
	g.Expect(assess(rotated.Data, m.policy, clk.Now()).action).To(Equal(keep))
}

func TestEnsureReplacesGarbageSecret(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	g.Expect(f.c.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.secret.Namespace, Name: f.secret.Name, Labels: map[string]string{"keep": "me"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{KeyTLSCert: []byte("garbage"), KeyTLSKey: []byte("garbage"), "other": []byte("untouched")},
	})).To(Succeed())
	o := f.options(t)
	g.Expect(f.manager(t, o).Ensure(f.ctx)).To(Succeed())
	s := f.expectConsistent(g, o.CertDir)
	g.Expect(s.Labels).To(HaveKeyWithValue("keep", "me"))
	g.Expect(s.Data).To(HaveKeyWithValue("other", []byte("untouched")))
}

func TestEnsureRefusesSecretOfAnotherType(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	g.Expect(f.c.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.secret.Namespace, Name: f.secret.Name},
		Data:       map[string][]byte{"password": []byte("hunter2")},
	})).To(Succeed())
	err := f.manager(t, f.options(t)).Ensure(f.ctx)
	g.Expect(err).To(MatchError(And(ContainSubstring(f.secret.String()), ContainSubstring(`type "Opaque"`), ContainSubstring("delete it"))))
	g.Expect(f.getSecret(g).Data).To(Equal(map[string][]byte{"password": []byte("hunter2")}), "the Secret is left alone")
}

func TestEnsureNamesMissingWebhookConfiguration(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	o := f.options(t)
	o.WebhookConfigurations = append(o.WebhookConfigurations, "no-such-configuration")
	m := f.manager(t, o)
	err := m.Ensure(f.ctx)
	g.Expect(err).To(MatchError(ContainSubstring(`ValidatingWebhookConfiguration "no-such-configuration" does not exist`)))
	g.Expect(m.Checker(nil)).To(HaveOccurred())
	_, err = os.Stat(filepath.Join(o.CertDir, KeyTLSCert))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "no file is served before the CA is trusted: %v", err)
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

func TestEnsureInjectsTheConversionWebhookCABundle(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	o := f.options(t)
	o.ConversionCRDs = []string{f.conversionCRD(t, apiextensionsv1.WebhookConverter)}
	m := f.manager(t, o)
	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	s := f.expectConsistent(g, o.CertDir)
	var crd apiextensionsv1.CustomResourceDefinition
	g.Expect(f.c.Get(f.ctx, client.ObjectKey{Name: o.ConversionCRDs[0]}, &crd)).To(Succeed())
	g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(s.Data[KeyCACert]))

	// Cleared by someone else, it is put back by the next Ensure; an Ensure
	// with nothing to do leaves the CRD's resourceVersion alone.
	orig := crd.DeepCopy()
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	g.Expect(f.c.Patch(f.ctx, &crd, client.MergeFrom(orig))).To(Succeed())
	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	g.Expect(f.c.Get(f.ctx, client.ObjectKey{Name: o.ConversionCRDs[0]}, &crd)).To(Succeed())
	g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(s.Data[KeyCACert]))
	rv := crd.ResourceVersion
	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	g.Expect(f.c.Get(f.ctx, client.ObjectKey{Name: o.ConversionCRDs[0]}, &crd)).To(Succeed())
	g.Expect(crd.ResourceVersion).To(Equal(rv))
}

func TestEnsureNamesACRDWithoutConversionWebhook(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	for _, c := range []struct {
		name string
		want string
	}{
		{name: f.conversionCRD(t, apiextensionsv1.NoneConverter), want: "has no conversion webhook"},
		{name: "widgets.no-such-group.certs.test", want: `CustomResourceDefinition "widgets.no-such-group.certs.test" does not exist`},
	} {
		o := f.options(t)
		o.ConversionCRDs = []string{c.name}
		m := f.manager(t, o)
		g.Expect(m.Ensure(f.ctx)).To(MatchError(ContainSubstring(c.want)))
		g.Expect(m.Checker(nil)).To(HaveOccurred())
	}
}

func TestStartReinjectsClearedCABundle(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	o := f.options(t)
	o.CheckInterval = 100 * time.Millisecond
	m := f.manager(t, o)

	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Start did not return after its context was cancelled")
		}
	})

	g.Eventually(func(g Gomega) {
		g.Expect(m.Checker(nil)).To(Succeed())
		f.expectConsistent(g, o.CertDir)
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	// Someone clears one webhook's caBundle; the next check puts it back.
	vwc := f.getVWC(g)
	orig := vwc.DeepCopy()
	vwc.Webhooks[1].ClientConfig.CABundle = nil
	g.Expect(f.c.Patch(f.ctx, vwc, client.MergeFrom(orig))).To(Succeed())
	g.Expect(f.getVWC(g).Webhooks[1].ClientConfig.CABundle).To(BeEmpty())
	g.Eventually(func(g Gomega) {
		f.expectConsistent(g, o.CertDir)
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
}

func TestServesTLSWithTheFiles(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	o := f.options(t)
	m := f.manager(t, o)
	g.Expect(m.Ensure(f.ctx)).To(Succeed())

	// Serve like controller-runtime's webhook server: through a certwatcher.
	cw, err := certwatcher.New(filepath.Join(o.CertDir, KeyTLSCert), filepath.Join(o.CertDir, KeyTLSKey))
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(f.ctx)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: cw.GetCertificate, MinVersion: tls.VersionTLS12})
	g.Expect(err).NotTo(HaveOccurred())
	var served sync.WaitGroup
	served.Go(func() { _ = cw.Start(ctx) })
	served.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).HandshakeContext(ctx)
			_ = conn.Close()
		}
	})
	t.Cleanup(func() { cancel(); _ = ln.Close(); served.Wait() })

	// dial handshakes trusting only the Secret's ca.crt.
	dial := func(serverName string) error {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(f.getSecret(g).Data[KeyCACert]) {
			return fmt.Errorf("no certificate in %s", KeyCACert)
		}
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}}
		conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		return conn.Close()
	}
	serverName := f.svc + "." + f.ns + ".svc"
	g.Expect(dial(serverName)).To(Succeed())
	g.Expect(dial(f.svc + ".elsewhere.svc")).To(MatchError(ContainSubstring("certificate is valid for")))

	// Losing the Secret means a new CA: the files are replaced, the watcher
	// reloads them, and a client trusting only the new ca.crt gets through.
	old := f.getSecret(g)
	g.Expect(f.c.Delete(f.ctx, old)).To(Succeed())
	g.Expect(m.Ensure(f.ctx)).To(Succeed())
	g.Expect(f.expectConsistent(g, o.CertDir).Data[KeyCACert]).NotTo(Equal(old.Data[KeyCACert]))
	g.Eventually(func() error { return dial(serverName) }).
		WithTimeout(15 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// secretRace makes n clients read the Secret before any of them writes it:
// each one's first Get of a Secret waits until all n have read theirs, so
// every client then writes on the same view and all but one lose the race.
type secretRace struct {
	n int

	mu      sync.Mutex
	read    int
	allRead chan struct{}
	lost    []error
}

func newSecretRace(n int) *secretRace {
	return &secretRace{n: n, allRead: make(chan struct{})}
}

func (r *secretRace) client(base client.WithWatch) client.Client {
	var once sync.Once
	record := func(obj client.Object, err error) {
		if _, ok := obj.(*corev1.Secret); ok && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			r.mu.Lock()
			r.lost = append(r.lost, err)
			r.mu.Unlock()
		}
	}
	return interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, ok := obj.(*corev1.Secret); ok {
				once.Do(func() {
					r.mu.Lock()
					if r.read++; r.read == r.n {
						close(r.allRead)
					}
					r.mu.Unlock()
					select {
					case <-r.allRead:
					case <-time.After(10 * time.Second):
					}
				})
			}
			return err
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			record(obj, err)
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			record(obj, err)
			return err
		},
	})
}

// ensureAll runs Ensure of every manager at once and expects all to succeed.
func ensureAll(ctx context.Context, g Gomega, managers []*Manager) {
	errs := make([]error, len(managers))
	var wg sync.WaitGroup
	for i, m := range managers {
		wg.Go(func() { errs[i] = m.Ensure(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		g.Expect(err).NotTo(HaveOccurred(), "manager %d", i)
	}
}

func TestConcurrentEnsureConverges(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	opts := []Options{f.options(t), f.options(t)}

	// Both replicas find no Secret and create one: one create wins, the
	// other replica adopts what the winner wrote.
	race := newSecretRace(2)
	var managers []*Manager
	for _, o := range opts {
		o.Clock = clk
		m, err := New(race.client(apiClient), o)
		g.Expect(err).NotTo(HaveOccurred())
		managers = append(managers, m)
	}
	ensureAll(f.ctx, g, managers)
	g.Expect(race.lost).To(ConsistOf(Satisfy(apierrors.IsAlreadyExists)), "exactly one create lost")
	created := f.expectConsistent(g, opts[0].CertDir)
	g.Expect(f.expectConsistent(g, opts[1].CertDir).ResourceVersion).To(Equal(created.ResourceVersion))

	// Both find the serving certificate due and update the Secret: one
	// update wins, the other conflicts and adopts it.
	clk.Step(270 * day)
	race = newSecretRace(2)
	for i, o := range opts {
		o.Clock = clk
		m, err := New(race.client(apiClient), o)
		g.Expect(err).NotTo(HaveOccurred())
		managers[i] = m
	}
	ensureAll(f.ctx, g, managers)
	g.Expect(race.lost).To(ConsistOf(Satisfy(apierrors.IsConflict)), "exactly one update lost")
	renewed := f.expectConsistent(g, opts[0].CertDir)
	g.Expect(f.expectConsistent(g, opts[1].CertDir).ResourceVersion).To(Equal(renewed.ResourceVersion))
	g.Expect(renewed.Data[KeyTLSCert]).NotTo(Equal(created.Data[KeyTLSCert]))
	g.Expect(renewed.Data[KeyCACert]).To(Equal(created.Data[KeyCACert]))

	// Without a barrier, a few more rounds on fresh namespaces.
	for round := range 3 {
		t.Run(fmt.Sprintf("free race %d", round), func(t *testing.T) {
			f := newFixture(t)
			g := NewWithT(t)
			opts := []Options{f.options(t), f.options(t)}
			ensureAll(f.ctx, g, []*Manager{f.manager(t, opts[0]), f.manager(t, opts[1])})
			s := f.expectConsistent(g, opts[0].CertDir)
			g.Expect(f.expectConsistent(g, opts[1].CertDir).ResourceVersion).To(Equal(s.ResourceVersion))
		})
	}
}
