// Package certs provisions the webhook's serving certificate without
// cert-manager: the operator keeps a self-signed CA and a serving certificate
// in a kubernetes.io/tls Secret, renews them before they expire, writes the
// serving pair into the webhook server's CertDir, and injects the CA into the
// caBundle of its ValidatingWebhookConfigurations and of the conversion
// webhook of its CustomResourceDefinitions.
//
// Every replica runs a Manager (it needs no leader election): replicas share
// the Secret, and whichever writes it first wins; the others read and use
// what it wrote.
package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Defaults of Options.
const (
	DefaultClusterDomain = "cluster.local"
	DefaultCAValidity    = 10 * 365 * 24 * time.Hour
	DefaultCertValidity  = 365 * 24 * time.Hour
	DefaultCheckInterval = time.Hour
)

// retryInterval is how soon Start tries again after a failed Ensure (or
// CheckInterval, when that is shorter).
const retryInterval = 10 * time.Second

// secretWriteAttempts bounds how often Ensure re-reads the Secret after
// losing a write race before it gives up until the next check.
const secretWriteAttempts = 5

// Options configure a Manager.
type Options struct {
	// Namespace and SecretName locate the kubernetes.io/tls Secret holding the
	// CA and the serving certificate. Required.
	Namespace  string
	SecretName string
	// ServiceName is the webhook's Service in Namespace; the serving
	// certificate is issued for <svc>, <svc>.<ns>, <svc>.<ns>.svc and
	// <svc>.<ns>.svc.<ClusterDomain>. Required.
	ServiceName string
	// CertDir is the webhook server's certificate directory; tls.crt and
	// tls.key are written there. It must be writable (an emptyDir, not the
	// Secret mounted as a volume). Required.
	CertDir string
	// WebhookConfigurations names the ValidatingWebhookConfigurations whose
	// every webhook gets the CA as clientConfig.caBundle.
	WebhookConfigurations []string
	// ConversionCRDs names the CustomResourceDefinitions whose conversion
	// webhook gets the CA as spec.conversion.webhook.clientConfig.caBundle.
	// Each must already use the Webhook conversion strategy.
	ConversionCRDs []string
	// ClusterDomain is the DNS suffix of Services; "cluster.local" when empty.
	ClusterDomain string
	// CAValidity is the lifetime of a new CA; 10 years when zero. It must be
	// at least twice CertValidity. The CA is replaced when less than a third
	// of its lifetime (or less than CertValidity) is left.
	CAValidity time.Duration
	// CertValidity is the lifetime of a new serving certificate; 1 year when
	// zero.
	CertValidity time.Duration
	// RenewBefore renews the serving certificate when less than this is left;
	// when zero, when less than a third of its lifetime is left.
	RenewBefore time.Duration
	// CheckInterval is how often Start calls Ensure; 1 hour when zero. It
	// must be shorter than the renewal window.
	CheckInterval time.Duration
	// Clock tells the time; the real clock when nil.
	Clock clock.Clock
}

// withDefaults returns o with every unset optional field at its default.
func (o Options) withDefaults() Options {
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.CertValidity == 0 {
		o.CertValidity = DefaultCertValidity
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// validate checks o after defaulting.
func (o Options) validate() error {
	var errs []error
	name := func(field, value string, check func(string) []string) {
		if value == "" {
			errs = append(errs, fmt.Errorf("%s is required", field))
			return
		}
		for _, msg := range check(value) {
			errs = append(errs, fmt.Errorf("%s %q: %s", field, value, msg))
		}
	}
	name("Namespace", o.Namespace, validation.IsDNS1123Label)
	name("SecretName", o.SecretName, validation.IsDNS1123Subdomain)
	name("ServiceName", o.ServiceName, validation.IsDNS1035Label)
	name("ClusterDomain", o.ClusterDomain, validation.IsDNS1123Subdomain)
	for i, n := range o.WebhookConfigurations {
		name(fmt.Sprintf("WebhookConfigurations[%d]", i), n, validation.IsDNS1123Subdomain)
	}
	for i, n := range o.ConversionCRDs {
		name(fmt.Sprintf("ConversionCRDs[%d]", i), n, validation.IsDNS1123Subdomain)
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("CertDir is required"))
	}
	for _, f := range []struct {
		field string
		d     time.Duration
	}{{"CAValidity", o.CAValidity}, {"CertValidity", o.CertValidity}, {"RenewBefore", o.RenewBefore}, {"CheckInterval", o.CheckInterval}} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", f.field, f.d))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if o.CAValidity < 2*o.CertValidity {
		errs = append(errs, fmt.Errorf("CAValidity (%s) must be at least twice CertValidity (%s)", o.CAValidity, o.CertValidity))
	}
	window := o.CertValidity / 3
	if o.RenewBefore > 0 {
		window = o.RenewBefore
		if o.RenewBefore >= o.CertValidity {
			errs = append(errs, fmt.Errorf("RenewBefore (%s) must be shorter than CertValidity (%s)", o.RenewBefore, o.CertValidity))
		}
	}
	if o.CheckInterval >= window {
		errs = append(errs, fmt.Errorf("CheckInterval (%s) must be shorter than the renewal window (%s), or the certificate may expire between checks", o.CheckInterval, window))
	}
	return errors.Join(errs...)
}

// dnsNames returns the serving certificate's DNS names.
func (o Options) dnsNames() []string {
	svc := o.ServiceName + "." + o.Namespace + ".svc"
	return []string{o.ServiceName, o.ServiceName + "." + o.Namespace, svc, svc + "." + o.ClusterDomain}
}

// The Manager's RBAC. Secrets are only needed in Namespace, but controller-gen
// emits one ClusterRole for the whole operator.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;update;patch

// Manager keeps the webhook's serving certificate and CA valid, on disk, in
// the Secret and in the caBundle of the webhook configurations. It is a
// manager.Runnable that runs on every replica.
type Manager struct {
	client client.Client
	opts   Options
	policy policy

	// mu serialises Ensure.
	mu sync.Mutex
	// ready is set by the first successful Ensure.
	ready atomic.Bool
}

var (
	_ manager.Runnable               = (*Manager)(nil)
	_ manager.LeaderElectionRunnable = (*Manager)(nil)
)

// New returns a Manager writing through c, or an error naming every invalid
// option. c should read from the API server, not from a cache: the Secret is
// read right before it is written (a cache would lose races against itself
// and would hold every Secret of the cluster in memory).
func New(c client.Client, o Options) (*Manager, error) {
	if c == nil {
		return nil, errors.New("certs: a client is required")
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("certs: invalid options: %w", err)
	}
	o.WebhookConfigurations = slices.Clone(o.WebhookConfigurations)
	o.ConversionCRDs = slices.Clone(o.ConversionCRDs)
	return &Manager{
		client: c,
		opts:   o,
		policy: policy{
			commonName:   o.ServiceName + "." + o.Namespace + ".svc",
			dnsNames:     o.dnsNames(),
			caValidity:   o.CAValidity,
			certValidity: o.CertValidity,
			renewBefore:  o.RenewBefore,
		},
	}, nil
}

// Ensure makes the certificate valid everywhere, and is idempotent: it reads
// the Secret and, when the Secret is missing, invalid, for other DNS names or
// due for renewal, issues a new serving certificate (and a new CA only when
// the CA itself is missing, invalid or near expiry) and writes the Secret;
// then it sets caBundle on every webhook of the configured
// ValidatingWebhookConfigurations and on the conversion webhook of the
// configured CustomResourceDefinitions when it differs, and last writes
// tls.crt and tls.key into CertDir when they differ. A missing configuration
// or CRD is an error that names it, and leaves the files alone.
func (m *Manager) Ensure(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	// Trust before use: the API server trusts a new CA before this replica
	// serves a certificate signed by it.
	for _, name := range m.opts.WebhookConfigurations {
		if err := m.injectCABundle(ctx, name, data[KeyCACert]); err != nil {
			return err
		}
	}
	for _, name := range m.opts.ConversionCRDs {
		if err := m.injectConversionCABundle(ctx, name, data[KeyCACert]); err != nil {
			return err
		}
	}
	if err := m.writeFiles(ctx, data); err != nil {
		return err
	}
	m.ready.Store(true)
	return nil
}

// ensureSecret returns the data of a Secret that holds a valid CA and serving
// certificate, writing one first when needed.
func (m *Manager) ensureSecret(ctx context.Context) (map[string][]byte, error) {
	log := ctrl.LoggerFrom(ctx)
	key := client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.SecretName}
	for range secretWriteAttempts {
		var secret corev1.Secret
		found := true
		if err := m.client.Get(ctx, key, &secret); apierrors.IsNotFound(err) {
			found = false
		} else if err != nil {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		if found && secret.Type != corev1.SecretTypeTLS {
			return nil, fmt.Errorf("the Secret %s has type %q, not %q (a type cannot change): delete it so that it is recreated", key, secret.Type, corev1.SecretTypeTLS)
		}

		now := m.opts.Clock.Now()
		d := assess(secret.Data, m.policy, now)
		if d.action == keep {
			return secret.Data, nil
		}
		if !found {
			d.reason = "the Secret does not exist"
		}
		data, err := issue(d, m.policy, now)
		if err != nil {
			return nil, err
		}

		if found {
			if secret.Data == nil {
				secret.Data = map[string][]byte{}
			}
			maps.Copy(secret.Data, data)
			err = m.client.Update(ctx, &secret)
		} else {
			secret = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}
			err = m.client.Create(ctx, &secret)
		}
		switch {
		case err == nil:
			log.Info("issued the webhook certificate", "secret", key, "action", d.action.String(), "reason", d.reason)
			return data, nil
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
			// Another replica wrote first: use what it wrote, if it suits us.
			log.V(1).Info("the Secret changed while issuing the webhook certificate; reading it again", "secret", key)
			continue
		default:
			return nil, fmt.Errorf("writing Secret %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("the Secret %s kept changing: gave up after %d attempts", key, secretWriteAttempts)
}

// writeFiles writes the serving pair into CertDir, each file only when its
// content differs, so that a certificate watcher reloads on real changes.
func (m *Manager) writeFiles(ctx context.Context, data map[string][]byte) error {
	if err := os.MkdirAll(m.opts.CertDir, 0o700); err != nil {
		return fmt.Errorf("creating the certificate directory: %w", err)
	}
	// The key first: a watcher reloading between the two writes fails on the
	// mismatched pair and keeps serving the old one until the second write.
	for _, f := range []struct {
		name string
		perm os.FileMode
	}{{KeyTLSKey, 0o600}, {KeyTLSCert, 0o644}} {
		path := filepath.Join(m.opts.CertDir, f.name)
		changed, err := writeFileIfChanged(path, data[f.name], f.perm)
		if err != nil {
			return err
		}
		if changed {
			ctrl.LoggerFrom(ctx).Info("wrote the webhook certificate file", "path", path)
		}
	}
	return nil
}

// writeFileIfChanged replaces path with content atomically (a temporary file
// in the same directory, then a rename) unless it already holds content.
func writeFileIfChanged(path string, content []byte, perm os.FileMode) (changed bool, err error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	return true, nil
}

// injectCABundle sets caBundle on every webhook of the named configuration
// that does not have it already.
func (m *Manager) injectCABundle(ctx context.Context, name string, caBundle []byte) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cfg admissionregistrationv1.ValidatingWebhookConfiguration
		if err := m.client.Get(ctx, client.ObjectKey{Name: name}, &cfg); err != nil {
			return err
		}
		orig := cfg.DeepCopy()
		changed := false
		for i := range cfg.Webhooks {
			if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, caBundle) {
				cfg.Webhooks[i].ClientConfig.CABundle = caBundle
				changed = true
			}
		}
		if !changed {
			return nil
		}
		// A merge patch replaces the whole webhooks list; the optimistic
		// lock makes that safe against concurrent edits.
		if err := m.client.Patch(ctx, &cfg, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("injected the webhook CA bundle", "validatingWebhookConfiguration", name, "webhooks", len(cfg.Webhooks))
		return nil
	})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the ValidatingWebhookConfiguration %q does not exist: %w", name, err)
	case err != nil:
		return fmt.Errorf("injecting caBundle into ValidatingWebhookConfiguration %q: %w", name, err)
	}
	return nil
}

// injectConversionCABundle sets caBundle on the conversion webhook of the
// named CustomResourceDefinition.
func (m *Manager) injectConversionCABundle(ctx context.Context, name string, caBundle []byte) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := m.client.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return err
		}
		conv := crd.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
			return fmt.Errorf("CustomResourceDefinition %q has no conversion webhook (spec.conversion.strategy is not Webhook with a clientConfig): install the operator's CRD manifest", name)
		}
		if bytes.Equal(conv.Webhook.ClientConfig.CABundle, caBundle) {
			return nil
		}
		orig := crd.DeepCopy()
		conv.Webhook.ClientConfig.CABundle = caBundle
		if err := m.client.Patch(ctx, &crd, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("injected the webhook CA bundle", "customResourceDefinition", name)
		return nil
	})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the CustomResourceDefinition %q does not exist: %w", name, err)
	case err != nil:
		return fmt.Errorf("injecting caBundle into the conversion webhook of CustomResourceDefinition %q: %w", name, err)
	}
	return nil
}

// Start calls Ensure every CheckInterval (sooner after a failure) until ctx
// is done. Errors are logged, not returned: a transient API error must not
// stop the manager.
func (m *Manager) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-certs")
	ctx = ctrl.LoggerInto(ctx, log)
	for {
		wait := m.opts.CheckInterval
		if err := m.Ensure(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = min(wait, retryInterval)
			log.Error(err, "ensuring the webhook certificate", "retryIn", wait.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.opts.Clock.After(wait):
		}
	}
}

// NeedLeaderElection returns false: every replica keeps its own files fresh.
func (m *Manager) NeedLeaderElection() bool { return false }

// Checker is a healthz.Checker for mgr.AddReadyzCheck: it fails until the
// first Ensure succeeded, so no replica is ready before it can serve TLS.
func (m *Manager) Checker(_ *http.Request) error {
	if !m.ready.Load() {
		return errors.New("the webhook serving certificate is not provisioned yet")
	}
	return nil
}
