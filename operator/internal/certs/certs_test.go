package certs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

const (
	day  = 24 * time.Hour
	year = 365 * day
)

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
