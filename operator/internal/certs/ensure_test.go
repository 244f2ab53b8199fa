package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
