package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/envtesthost"
	"github.com/gauntlet-dev/gauntlet/chaos/viewfault"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// EnvtestOptions run the set on envtest (a real kube-apiserver and etcd,
// no nodes) with the operator as a process behind the API proxy.
type EnvtestOptions struct {
	// Assets is the folder with kube-apiserver and etcd.
	Assets string
}

// setupEnvtest starts envtest, applies the operator's manifests but its
// Deployment, starts the proxy and the operator's process with its
// ServiceAccount's token, and the simulators.
func (e *Engine) setupEnvtest(ctx context.Context) error {
	pr := e.operator.Process
	if pr == nil {
		return fmt.Errorf("%s has no spec.process: --envtest runs the operator as a process on the host, and the Operator file must say how to start it", e.o.Set.OperatorFile)
	}
	start := time.Now()
	h, err := envtesthost.Start(envtesthost.Options{Scheme: e.scheme, Assets: e.o.Envtest.Assets, Logf: e.logf})
	if err != nil {
		return err
	}
	e.host = h
	e.Config = h.Env.Config
	e.logf("envtest API server up in %s", time.Since(start).Round(time.Millisecond))
	objs, err := e.renderOperator()
	if err != nil {
		return err
	}
	kept, sa, err := e.forEnvtest(objs)
	if err != nil {
		return err
	}
	d, err := cluster.Deploy(ctx, e.Config, kept, cluster.DeployOptions{Namespace: e.operator.Namespace})
	if err != nil {
		return err
	}
	e.logf("applied %d operator objects (its Deployment runs as a process instead)", len(d.Applied))
	h.Simulate(ctx)
	if err := h.StartProxy(e.proxyLog()); err != nil {
		return err
	}
	token, err := e.serviceAccountToken(ctx, sa)
	if err != nil {
		return err
	}
	if err := e.grantMetrics(ctx); err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Dir(e.o.Set.OperatorFile))
	if err != nil {
		return err
	}
	if err := h.StartOperator(ctx, envtesthost.Operator{Dir: dir, Process: pr, Vars: e.opVars, Token: token, ServiceAccount: sa}); err != nil {
		return err
	}
	e.view = &viewfault.Access{Proxy: h.Proxy,
		Kill:   func(context.Context) error { return h.Kill() },
		Target: func(context.Context) (chaosmesh.Pods, error) { return h.Target(), nil }}
	return nil
}

// forEnvtest keeps the objects envtest can serve: the operator's own
// Deployment becomes the process (its ServiceAccount is returned), and
// admission webhooks are dropped, since no Service reaches the process's
// webhook server; a CRD's conversion webhook becomes None for the same
// reason. Each drop is logged.
func (e *Engine) forEnvtest(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, client.ObjectKey, error) {
	var kept []*unstructured.Unstructured
	sa := client.ObjectKey{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			if e.isOperatorWorkload(u) {
				name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
				if name == "" {
					name = "default"
				}
				sa = client.ObjectKey{Namespace: u.GetNamespace(), Name: name}
				if sa.Namespace == "" {
					sa.Namespace = e.operator.Namespace
				}
				continue
			}
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			e.logf("envtest: leaving out %s %s (no Service reaches the process's webhook server; admission is the integration tier's)", u.GetKind(), u.GetName())
			continue
		case "CustomResourceDefinition":
			if s, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy"); s == "Webhook" {
				_ = unstructured.SetNestedField(u.Object, "None", "spec", "conversion", "strategy")
				unstructured.RemoveNestedField(u.Object, "spec", "conversion", "webhook")
				e.logf("envtest: CRD %s converts with None instead of its webhook", u.GetName())
			}
		}
		if strings.HasPrefix(u.GetAPIVersion(), "cert-manager.io/") || strings.HasPrefix(u.GetAPIVersion(), "monitoring.coreos.com/") {
			e.logf("envtest: leaving out %s %s (%s is not served here)", u.GetKind(), u.GetName(), u.GetAPIVersion())
			continue
		}
		kept = append(kept, u)
	}
	if sa.Name == "" {
		return nil, sa, e.noOperatorWorkload()
	}
	return kept, sa, nil
}

// isOperatorWorkload says whether an object of the operator's manifests
// is the Deployment that runs the operator: in spec.namespace, with pods
// spec.selector matches.
func (e *Engine) isOperatorWorkload(u *unstructured.Unstructured) bool {
	tmpl, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	ns := u.GetNamespace()
	if ns == "" {
		ns = e.operator.Namespace // applied there
	}
	return u.GetKind() == "Deployment" && ns == e.operator.Namespace &&
		labels.SelectorFromSet(e.operator.Selector).Matches(labels.Set(tmpl))
}

func (e *Engine) noOperatorWorkload() error {
	return fmt.Errorf("no Deployment in namespace %s of the operator's manifests has pods labelled %s: spec.namespace and spec.selector name the operator's pods",
		e.operator.Namespace, labels.SelectorFromSet(e.operator.Selector))
}

// serviceAccountToken asks the API server for a token of the operator's
// ServiceAccount: the process gets exactly the permissions its manifests
// grant its pods.
func (e *Engine) serviceAccountToken(ctx context.Context, sa client.ObjectKey) (string, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return "", err
	}
	if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Get(ctx, sa.Name, metav1.GetOptions{}); err != nil {
		return "", fmt.Errorf("the operator's ServiceAccount %s (its Deployment's serviceAccountName): %w", sa, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for %s: %w", sa, err)
	}
	return tr.Status.Token, nil
}
