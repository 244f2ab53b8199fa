package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// EnvtestOptions run the set on envtest (a real kube-apiserver and etcd,
// no nodes) with the operator as a process behind the API proxy.
type EnvtestOptions struct {
	// Assets is the folder with kube-apiserver and etcd.
	Assets string
}

// hermetic is what runs in place of a cluster's nodes on envtest: the
// operator's process, the proxy in front of it, and the simulators that
// play the controllers and kubelets envtest lacks.
type hermetic struct {
	env     *framework.Envtest
	proxy   *apiproxy.Proxy
	op      *process
	metrics string // the operator's metrics address, host:port
	work    string // the process's folder: kubeconfig, binary, log; removed at teardown
	logPath string
	stop    context.CancelFunc
	stopped chan struct{}
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
	env, err := framework.StartEnvtest(framework.EnvtestOptions{Scheme: e.scheme, BinaryAssetsDirectory: e.o.Envtest.Assets})
	if err != nil {
		return err
	}
	h := &hermetic{env: env}
	e.hermetic = h
	e.Config = env.Config
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
	simCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.stop, h.stopped = cancel, make(chan struct{})
	go e.simulate(simCtx)

	if h.proxy, err = apiproxy.StartWith(e.Config, 0, apiproxy.Options{ErrorLog: e.proxyLog()}); err != nil {
		return err
	}
	token, err := e.serviceAccountToken(ctx, sa)
	if err != nil {
		return err
	}
	if err := e.grantMetrics(ctx); err != nil {
		return err
	}
	return e.startProcess(ctx, pr, token, sa)
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

// startProcess writes a kubeconfig that reaches the API server through
// the proxy with the token, builds the operator when asked, and starts it.
func (e *Engine) startProcess(ctx context.Context, pr *scenario.Process, token string, sa client.ObjectKey) error {
	h := e.hermetic
	dir, err := filepath.Abs(filepath.Dir(e.o.Set.OperatorFile))
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gauntlet-operator-")
	if err != nil {
		return err
	}
	h.work = work
	kubeconfig := filepath.Join(work, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: h.proxy.URL(), CertificateAuthorityData: h.proxy.CAData()}
	cfg.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["operator"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "operator", Namespace: sa.Namespace}
	cfg.CurrentContext = "operator"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return err
	}
	metricsPort, err1 := framework.FreePort()
	probePort, err2 := framework.FreePort()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("no free loopback port for the operator's endpoints: %w", err)
	}
	metrics, probe := fmt.Sprintf("127.0.0.1:%d", metricsPort), fmt.Sprintf("127.0.0.1:%d", probePort)
	// The engine's variables, under the run's --set overrides.
	vars := e.opVars
	vars.Overrides = map[string]string{scenario.VarMetricsAddress: metrics, scenario.VarProbeAddress: probe,
		scenario.VarProcessBinary: filepath.Join(work, "operator")}
	maps.Copy(vars.Overrides, e.opVars.Overrides)
	if len(pr.Build) > 0 {
		if err := e.build(ctx, pr.Build, dir, vars); err != nil {
			return err
		}
	}
	h.logPath = filepath.Join(work, "operator.log")
	logs, err := os.Create(h.logPath)
	if err != nil {
		return err
	}
	args := vars.ExpandAll(pr.Command)
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+sa.Namespace, "POD_NAME="+sa.Name+"-process")
	for k, v := range pr.Env {
		env = append(env, k+"="+vars.Expand(v))
	}
	h.op = &process{name: render.Program(args[0], dir), args: args[1:], env: env, dir: work, logs: logs, logf: e.logf}
	h.metrics = metrics
	if err := h.op.start(); err != nil {
		return err
	}
	e.view = &viewAccess{proxy: h.proxy,
		kill:   func(context.Context) error { return h.op.kill() },
		target: func(context.Context) (chaosmesh.Pods, error) { return h.target(), nil }}
	e.logf("operator process %d started (%s, log %s, copied into a failed scenario's bundle); its client goes through the API proxy at %s", h.op.pid(), args[0], h.logPath, h.proxy.URL())
	if err := h.op.running(ctx, processStartsWithin); err != nil {
		return fmt.Errorf("%w: %s", err, tail(h.logPath, 20))
	}
	return nil
}

// The envtest host's times. An operator process that has not exited
// processStartsWithin after its start is taken as running (one that fails
// its flags or its first list exits sooner); at teardown it gets
// processStopWithin after SIGTERM. The simulators run every simulatorTick,
// about as soon as kube-controller-manager and a kubelet would act.
const (
	processStartsWithin = 3 * time.Second
	processStopWithin   = 10 * time.Second
	simulatorTick       = 200 * time.Millisecond
)

// simulate plays, every simulatorTick, the StatefulSet and Deployment controllers
// with their kubelets (pods made and marked ready), the garbage collector
// and the claim protection controller, which envtest does not run.
func (e *Engine) simulate(ctx context.Context) {
	defer close(e.hermetic.stopped)
	c := e.hermetic.env.Client
	sts := &framework.StatefulSetSimulator{Client: c}
	deploys := &framework.DeploymentSimulator{Client: c}
	gc := &framework.GarbageCollector{Client: c, Kinds: collectedKinds()}
	claims := &framework.ClaimProtection{Client: c}
	tick := time.NewTicker(simulatorTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, step := range []func(context.Context) (bool, error){sts.Step, deploys.Step, gc.Step, claims.Step} {
			if _, err := step(ctx); err != nil && ctx.Err() == nil {
				e.logf("envtest simulator: %v", err)
			}
		}
	}
}

// collectedKinds are the kinds the simulated garbage collector deletes
// once their owner is gone: every kind of childResources, which the
// oracles judge, and the pods (TestCollectedKindsCoverChildResources).
func collectedKinds() []client.ObjectList {
	return []client.ObjectList{
		&appsv1.StatefulSetList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{},
		&corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &policyv1.PodDisruptionBudgetList{}, &batchv1.CronJobList{}, &batchv1.JobList{},
		&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
	}
}

func (h *hermetic) teardown() error {
	if h.op != nil {
		h.op.stop(processStopWithin)
	}
	if h.stop != nil {
		h.stop()
		<-h.stopped
	}
	if h.proxy != nil {
		_ = h.proxy.Close()
	}
	// A failed scenario's bundle already holds the log (copyLog); the
	// binary is some hundred megabytes a run, which a campaign's dozens of
	// runs would leave behind.
	var errs []error
	if h.work != "" {
		errs = append(errs, os.RemoveAll(h.work))
	}
	if h.env != nil {
		errs = append(errs, h.env.Stop())
	}
	return errors.Join(errs...)
}

// tail is the last n lines of a file, for an error message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "last lines of " + path + ":\n" + strings.Join(lines, "\n")
}

// build runs the Operator file's build command in its folder.
func (e *Engine) build(ctx context.Context, argv []string, dir string, vars render.Vars) error {
	return render.Build(ctx, argv, dir, vars, nil, e.logf)
}

// copyLog puts the operator process's log and every request the proxy
// saw in a failed scenario's bundle.
func (h *hermetic) copyLog(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return err
	}
	var reqs strings.Builder
	for _, r := range h.proxy.Requests() {
		fmt.Fprintf(&reqs, "%s %3d %-10s %s%s\n", r.At.Format("15:04:05.000"), r.Status, r.Took.Round(time.Microsecond), r.Info, injectedNote(r.Injected))
	}
	return errors.Join(os.WriteFile(filepath.Join(dir, "operator-process.log"), b, 0o644),
		os.WriteFile(filepath.Join(dir, "proxy-requests.txt"), []byte(reqs.String()), 0o644))
}

func injectedNote(s string) string {
	if s == "" {
		return ""
	}
	return " [" + s + "]"
}

// target is the operator's process, named as a fault's target.
func (h *hermetic) target() chaosmesh.Pods {
	return chaosmesh.Pods{Namespace: "host", Names: []string{fmt.Sprintf("operator-process-%d", h.op.pid())}}
}
