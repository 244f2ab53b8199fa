package envtesthost

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// The host's times. An operator process that has not exited
// processStartsWithin after its start is taken as running (one that fails
// its flags or its first list exits sooner); at teardown it gets
// processStopWithin after SIGTERM. The simulators run every simulatorTick,
// about as soon as kube-controller-manager and a kubelet would act.
const (
	processStartsWithin = 3 * time.Second
	processStopWithin   = 10 * time.Second
	simulatorTick       = 200 * time.Millisecond
)

// Options start a host.
type Options struct {
	Scheme *runtime.Scheme
	// Assets is the folder with kube-apiserver and etcd.
	Assets string
	Logf   func(format string, args ...any)
}

// Host is envtest with the operator's process, the proxy in front of it
// and the simulators. Start it, apply what the operator needs, then
// Simulate, StartProxy and StartOperator; Teardown undoes all of it.
type Host struct {
	Env   *framework.Envtest
	Proxy *apiproxy.Proxy

	logf    func(format string, args ...any)
	op      *process
	metrics string // the operator's metrics address, host:port
	work    string // the process's folder: kubeconfig, binary, log; removed at teardown
	logPath string
	stop    context.CancelFunc
	stopped chan struct{}
	sets    *framework.StatefulSetSimulator
}

// Start starts envtest.
func Start(o Options) (*Host, error) {
	env, err := framework.StartEnvtest(framework.EnvtestOptions{Scheme: o.Scheme, BinaryAssetsDirectory: o.Assets})
	if err != nil {
		return nil, err
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Host{Env: env, logf: logf, sets: &framework.StatefulSetSimulator{Client: env.Client}}, nil
}

// StartProxy starts the API proxy the operator's client goes through.
func (h *Host) StartProxy(errorLog *log.Logger) error {
	p, err := apiproxy.StartWith(h.Env.Config, 0, apiproxy.Options{ErrorLog: errorLog})
	h.Proxy = p
	return err
}

// Operator is the operator's process as its Operator file says.
type Operator struct {
	// Dir is the Operator file's folder, where its build runs and
	// relative programs are found.
	Dir     string
	Process *scenario.Process
	// Vars are the file's variables under the run's --set overrides.
	Vars render.Vars
	// Token is a token of ServiceAccount, the one the operator's
	// Deployment runs as: the process gets exactly its permissions.
	Token          string
	ServiceAccount client.ObjectKey
}

// StartOperator writes a kubeconfig that reaches the API server through
// the proxy with the token, builds the operator when asked, and starts it.
func (h *Host) StartOperator(ctx context.Context, op Operator) error {
	work, err := os.MkdirTemp("", "gauntlet-operator-")
	if err != nil {
		return err
	}
	h.work = work
	kubeconfig := filepath.Join(work, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: h.Proxy.URL(), CertificateAuthorityData: h.Proxy.CAData()}
	cfg.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: op.Token}
	cfg.Contexts["operator"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "operator", Namespace: op.ServiceAccount.Namespace}
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
	vars := op.Vars
	vars.Overrides = map[string]string{scenario.VarMetricsAddress: metrics, scenario.VarProbeAddress: probe,
		scenario.VarProcessBinary: filepath.Join(work, "operator")}
	maps.Copy(vars.Overrides, op.Vars.Overrides)
	pr := op.Process
	if len(pr.Build) > 0 {
		if err := render.Build(ctx, pr.Build, op.Dir, vars, nil, h.logf); err != nil {
			return err
		}
	}
	h.logPath = filepath.Join(work, "operator.log")
	logs, err := os.Create(h.logPath)
	if err != nil {
		return err
	}
	args := vars.ExpandAll(pr.Command)
	sa := op.ServiceAccount
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+sa.Namespace, "POD_NAME="+sa.Name+"-process")
	for k, v := range pr.Env {
		env = append(env, k+"="+vars.Expand(v))
	}
	h.op = &process{name: render.Program(args[0], op.Dir), args: args[1:], env: env, dir: work, logs: logs, logf: h.logf}
	h.metrics = metrics
	if err := h.op.start(); err != nil {
		return err
	}
	h.logf("operator process %d started (%s, log %s, copied into a failed scenario's bundle); its client goes through the API proxy at %s", h.op.pid(), args[0], h.logPath, h.Proxy.URL())
	if err := h.op.running(ctx, processStartsWithin); err != nil {
		return fmt.Errorf("%w: %s", err, tail(h.logPath, 20))
	}
	return nil
}

// Kill kills the operator's process, which its supervisor starts again.
func (h *Host) Kill() error { return h.op.kill() }

// Restarts counts the process's starts after the first.
func (h *Host) Restarts() int { return h.op.restarts() }

// LastPanic is the operator process's last Go panic, as its log shows
// it: the panic line and the first function of the goroutine that
// panicked ("panic: runtime error: ... in pkg.Func"), and that function
// alone; "" when it has not panicked.
func (h *Host) LastPanic() (message, function string) {
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return "", ""
	}
	return lastPanic(string(b))
}

func lastPanic(log string) (message, function string) {
	i := strings.LastIndex(log, "\npanic: ")
	if i < 0 {
		if !strings.HasPrefix(log, "panic: ") {
			return "", ""
		}
	} else {
		log = log[i+1:]
	}
	lines := strings.Split(log, "\n")
	message = strings.TrimSpace(lines[0])
	for j, l := range lines {
		if strings.HasPrefix(l, "goroutine ") && j+1 < len(lines) {
			fn, _, _ := strings.Cut(lines[j+1], "(")
			if fn = strings.TrimSpace(fn); fn != "" && !strings.HasPrefix(fn, "panic") {
				message, function = message+" in "+fn, fn
			}
			break
		}
	}
	return message, function
}

// MetricsAddress is the operator's metrics endpoint, host:port.
func (h *Host) MetricsAddress() string { return h.metrics }

// Target is the operator's process, named as a fault's target.
func (h *Host) Target() chaosmesh.Pods {
	return chaosmesh.Pods{Namespace: "host", Names: []string{fmt.Sprintf("operator-process-%d", h.op.pid())}}
}

// Simulate starts the simulators: every simulatorTick they play the
// StatefulSet and Deployment controllers with their kubelets (pods made
// and marked ready), the garbage collector, the claim protection
// controller and a volume provisioner whose volumes bind and grow, which
// envtest does not run. Teardown stops them.
func (h *Host) Simulate(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.stop, h.stopped = cancel, make(chan struct{})
	go func() {
		defer close(h.stopped)
		c := h.Env.Client
		deploys := &framework.DeploymentSimulator{Client: c}
		gc := &framework.GarbageCollector{Client: c, Kinds: CollectedKinds()}
		claims := &framework.ClaimProtection{Client: c}
		volumes := &framework.VolumeBinder{Client: c}
		// Every simulator steps each tick, whatever another's error.
		all := func(ctx context.Context) (bool, error) {
			var errs []error
			for _, step := range []framework.EnvStep{h.sets.Step, deploys.Step, gc.Step, claims.Step, volumes.Step} {
				_, err := step(ctx)
				errs = append(errs, err)
			}
			return false, errors.Join(errs...)
		}
		framework.RunEvery(ctx, simulatorTick, all, func(err error) { h.logf("envtest simulator: %v", err) })
	}()
}

// LosePods deletes pods of StatefulSets at once (no grace period) and
// keeps the simulated controller from making them again until RestorePods:
// the window a cluster's controller leaves between a pod's loss and its
// replacement, held open.
func (h *Host) LosePods(ctx context.Context, namespace string, names ...string) error {
	h.sets.Withhold(namespace, names...)
	for _, name := range names {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		if err := h.Env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
		}
	}
	return nil
}

// RestorePods lets the simulated controller make the pods again.
func (h *Host) RestorePods(namespace string, names ...string) { h.sets.Restore(namespace, names...) }

// CollectedKinds are the kinds the simulated garbage collector deletes
// once their owner is gone: every kind of child the engine's oracles
// judge, and the pods.
func CollectedKinds() []client.ObjectList {
	return []client.ObjectList{
		&appsv1.StatefulSetList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{},
		&corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &policyv1.PodDisruptionBudgetList{}, &batchv1.CronJobList{}, &batchv1.JobList{},
		&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
	}
}

// Teardown stops the process, the simulators, the proxy and envtest,
// and removes the process's folder: a failed scenario's bundle already
// holds the log (CopyLog), and the binary is some hundred megabytes a
// run, which a campaign's dozens of runs would leave behind.
func (h *Host) Teardown() error {
	if h.op != nil {
		h.op.stop(processStopWithin)
	}
	if h.stop != nil {
		h.stop()
		<-h.stopped
	}
	if h.Proxy != nil {
		_ = h.Proxy.Close()
	}
	var errs []error
	if h.work != "" {
		errs = append(errs, os.RemoveAll(h.work))
	}
	if h.Env != nil {
		errs = append(errs, h.Env.Stop())
	}
	return errors.Join(errs...)
}

// CopyLog puts the operator process's log and every request the proxy
// saw in a failed scenario's bundle.
func (h *Host) CopyLog(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return err
	}
	var reqs strings.Builder
	for _, r := range h.Proxy.Requests() {
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
