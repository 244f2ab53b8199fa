//go:build e2e

package install_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// TestInstallE2E installs Chaos Mesh on a fresh kind cluster, installs it
// again (nothing may change), injects a pod-kill and a partition into a
// 3-pod StatefulSet, removes them, and uninstalls. Images:
// CHAOS_CONTROLLER_IMAGE and CHAOS_DAEMON_IMAGE (the install defaults when
// unset) must be in the local Docker engine; the target runs
// CHAOS_TARGET_IMAGE (registry.k8s.io/pause:3.10.1, in the node image).
func TestInstallE2E(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	controllerImage := getenv("CHAOS_CONTROLLER_IMAGE", install.DefaultControllerImage)
	daemonImage := getenv("CHAOS_DAEMON_IMAGE", install.DefaultDaemonImage)
	cfg, c := startKind(t, controllerImage, daemonImage)

	opts := install.Options{ControllerImage: controllerImage, DaemonImage: daemonImage, Timeout: 5 * time.Minute}
	t.Cleanup(func() {
		if t.Failed() {
			dumpChaosMesh(t, cfg, install.DefaultNamespace)
		}
	})
	podsBefore := expectInstallTwiceChangesNothing(t, cfg, c, opts)
	expectInstallReplacesMismatchedCertificates(t, cfg, c, opts, podsBefore)

	ns := createTarget(t, c)
	uids := podUIDs(t, c, ns)
	injectAndRemove(t, c, podKillChaos(ns), func(o client.Object) []chaosv1alpha1.ChaosCondition {
		return o.(*chaosv1alpha1.PodChaos).Status.Conditions
	})
	g.Eventually(func() map[string]string { return podUIDs(t, c, ns) }).WithTimeout(time.Minute).ShouldNot(Equal(uids), "pod-kill must replace a pod")

	g.Expect(waitStatefulSetReady(ctx, c, ns)).To(Succeed())
	injectAndRemove(t, c, partitionChaos(ns), func(o client.Object) []chaosv1alpha1.ChaosCondition {
		return o.(*chaosv1alpha1.NetworkChaos).Status.Conditions
	})

	start := time.Now()
	g.Expect(install.Uninstall(ctx, cfg, opts)).To(Succeed())
	report(t, "uninstall: %s", time.Since(start).Round(time.Millisecond))
	err := c.Get(ctx, client.ObjectKey{Name: install.DefaultNamespace}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace left: %v", err)
}

// startKind starts the kind cluster (or takes the existing one), waits for
// its system pods and loads the chaos images into it; it skips the test
// when a fresh cluster is asked for and the images are not in the local
// Docker engine.
func startKind(t *testing.T, controllerImage, daemonImage string) (*rest.Config, client.Client) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	existing := os.Getenv(cluster.EnvExistingCluster) == "1"
	if !existing {
		for _, img := range []string{controllerImage, daemonImage} {
			if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", img).CombinedOutput(); err != nil {
				t.Skipf("chaos image %s is not in the local Docker engine (%v: %s); the test lifts once make chaos-images has built them", img, err, strings.TrimSpace(string(out)))
			}
		}
	}

	nodeImage := getenv("GAUNTLET_NODE_IMAGE", cluster.DefaultNodeImage)
	config := os.Getenv("GAUNTLET_KIND_CONFIG") // else the one built in for the image
	if config == "" {
		var err error
		config, err = cluster.KindConfigFile(cluster.KindConfigFor(nodeImage, false))
		g.Expect(err).NotTo(HaveOccurred())
	}
	cluster, err := cluster.Start(ctx, cluster.Options{NodeImage: nodeImage, ConfigFile: config})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := cluster.Teardown(); err != nil {
			t.Error(err)
		}
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	scheme, err := install.Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.WaitSystemReady(ctx, c, 3*time.Minute)).To(Succeed())
	if !existing {
		g.Expect(cluster.LoadImages(ctx, controllerImage, daemonImage)).To(Succeed())
	}
	return cfg, c
}

// expectInstallTwiceChangesNothing installs Chaos Mesh, then again: the
// second Install reuses the certificates, changes nothing and rolls no pod.
// It returns the pods after the first Install.
func expectInstallTwiceChangesNothing(t *testing.T, cfg *rest.Config, c client.Client, opts install.Options) map[string]string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	first, err := install.Install(ctx, cfg, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.CertificatesReused).To(BeFalse())
	g.Expect(first.Changed).NotTo(BeEmpty())
	podsBefore := podUIDs(t, c, install.DefaultNamespace)

	second, err := install.Install(ctx, cfg, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.CertificatesReused).To(BeTrue())
	g.Expect(second.Changed).To(BeEmpty(), "a second Install must change nothing")
	g.Expect(second.Applied).To(Equal(first.Applied))
	g.Expect(podUIDs(t, c, install.DefaultNamespace)).To(Equal(podsBefore), "a second Install must roll no pod")
	report(t, "install: first %s (%d objects applied, %d created or changed), second %s (%d changed)",
		first.Duration.Round(time.Millisecond), len(first.Applied), len(first.Changed), second.Duration.Round(time.Millisecond), len(second.Changed))
	for _, s := range second.Steps {
		report(t, "  second install step %s: %s", s.Name, s.Duration.Round(time.Millisecond))
	}
	return podsBefore
}

// expectInstallReplacesMismatchedCertificates makes the Secrets disagree on
// their CA: the next Install replaces the whole set, the webhooks' caBundle
// with it, and rolls every pod of podsBefore onto it.
func expectInstallReplacesMismatchedCertificates(t *testing.T, cfg *rest.Config, c client.Client, opts install.Options, podsBefore map[string]string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	daemonCerts := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: install.DaemonSecret}, daemonCerts)).To(Succeed())
	webhookCerts := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: install.WebhookSecret}, webhookCerts)).To(Succeed())
	daemonCerts.Data["ca.crt"] = webhookCerts.Data["tls.crt"]
	g.Expect(c.Update(ctx, daemonCerts)).To(Succeed())
	third, err := install.Install(ctx, cfg, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.CertificatesReused).To(BeFalse())
	g.Expect(third.CertificatesReason).To(ContainSubstring("another CA"))
	g.Expect(third.Changed).To(ContainElements(
		"Secret/chaos-mesh/"+install.WebhookSecret, "Secret/chaos-mesh/"+install.DaemonSecret, "Secret/chaos-mesh/"+install.DaemonClientSecret,
		"Deployment/chaos-mesh/"+install.ControllerDeployment, "DaemonSet/chaos-mesh/"+install.DaemonSet,
		"MutatingWebhookConfiguration//chaos-mesh-mutation", "ValidatingWebhookConfiguration//chaos-mesh-validation",
	))
	rolled := podUIDs(t, c, install.DefaultNamespace)
	g.Expect(rolled).To(HaveLen(len(podsBefore)))
	for name := range rolled {
		g.Expect(podsBefore).NotTo(HaveKey(name), "pod %s was not replaced", name)
	}
	report(t, "install over mismatched certificates: %s (%d changed; new certificates, pods rolled)", third.Duration.Round(time.Millisecond), len(third.Changed))
}

// podKillChaos kills one pod of the target StatefulSet in ns.
func podKillChaos(ns string) *chaosv1alpha1.PodChaos {
	return &chaosv1alpha1.PodChaos{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-kill", Namespace: ns},
		Spec: chaosv1alpha1.PodChaosSpec{
			Action: chaosv1alpha1.PodKillAction,
			ContainerSelector: chaosv1alpha1.ContainerSelector{PodSelector: chaosv1alpha1.PodSelector{
				Mode: chaosv1alpha1.OneMode,
				Selector: chaosv1alpha1.PodSelectorSpec{GenericSelectorSpec: chaosv1alpha1.GenericSelectorSpec{
					Namespaces: []string{ns}, LabelSelectors: map[string]string{"app": "target"},
				}},
			}},
		},
	}
}

// partitionChaos cuts target-0 off from the other pods of the target
// StatefulSet in ns, both ways.
func partitionChaos(ns string) *chaosv1alpha1.NetworkChaos {
	return &chaosv1alpha1.NetworkChaos{
		ObjectMeta: metav1.ObjectMeta{Name: "partition", Namespace: ns},
		Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector: chaosv1alpha1.PodSelector{
				Mode: chaosv1alpha1.AllMode,
				Selector: chaosv1alpha1.PodSelectorSpec{
					GenericSelectorSpec: chaosv1alpha1.GenericSelectorSpec{Namespaces: []string{ns}},
					Pods:                map[string][]string{ns: {"target-0"}},
				},
			},
			Action:    chaosv1alpha1.PartitionAction,
			Direction: chaosv1alpha1.Both,
			Target: &chaosv1alpha1.PodSelector{
				Mode: chaosv1alpha1.AllMode,
				Selector: chaosv1alpha1.PodSelectorSpec{GenericSelectorSpec: chaosv1alpha1.GenericSelectorSpec{
					Namespaces:     []string{ns},
					LabelSelectors: map[string]string{"app": "target"},
					ExpressionSelectors: []metav1.LabelSelectorRequirement{{
						Key: "statefulset.kubernetes.io/pod-name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"target-0"},
					}},
				}},
			},
		},
	}
}

// injectAndRemove creates obj, waits for AllInjected, deletes it and waits
// until it is gone (its finalizer removed), reporting both durations.
func injectAndRemove(t *testing.T, c client.Client, obj client.Object, conditions func(client.Object) []chaosv1alpha1.ChaosCondition) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	kind := fmt.Sprintf("%T", obj)[len("*v1alpha1."):]
	start := time.Now()
	g.Expect(c.Create(ctx, obj)).To(Succeed())
	err := framework.PollFor(ctx, kind+" "+obj.GetName()+" to be AllInjected", 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		got := obj.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			return false, err.Error(), nil
		}
		conds := conditions(got)
		for _, cond := range conds {
			if cond.Type == chaosv1alpha1.ConditionAllInjected && cond.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %+v", conds), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	injected := time.Since(start)

	start = time.Now()
	g.Expect(c.Delete(ctx, obj)).To(Succeed())
	err = framework.PollFor(ctx, kind+" "+obj.GetName()+" to be gone", 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		got := obj.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), got)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("finalizers %v", got.GetFinalizers()), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	report(t, "%s %s: AllInjected after %s, gone %s after delete", kind, obj.GetName(), injected.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// createTarget makes a namespace with a StatefulSet of three pause pods.
func createTarget(t *testing.T, c client.Client) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chaos-target-"}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	labels := map[string]string{"app": "target"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "target", Namespace: ns.Name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "target", Image: getenv("CHAOS_TARGET_IMAGE", "registry.k8s.io/pause:3.10.1"), ImagePullPolicy: corev1.PullIfNotPresent,
					}},
				},
			},
		},
	}
	g.Expect(c.Create(ctx, sts)).To(Succeed())
	g.Expect(waitStatefulSetReady(ctx, c, ns.Name)).To(Succeed())
	return ns.Name
}

func waitStatefulSetReady(ctx context.Context, c client.Client, ns string) error {
	return framework.PollFor(ctx, "StatefulSet "+ns+"/target to have 3 ready pods", 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		sts := &appsv1.StatefulSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "target"}, sts); err != nil {
			return false, err.Error(), nil
		}
		return sts.Status.ReadyReplicas == 3 && sts.Status.Replicas == 3, fmt.Sprintf("status %+v", sts.Status), nil
	})
}

func podUIDs(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

// dumpChaosMesh prints the pods, events and logs of the installation.
func dumpChaosMesh(t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Log(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) //nolint:forbidigo // runs in Cleanup, after t.Context() is cancelled
	defer cancel()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Log(err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s: %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		for _, c := range p.Spec.Containers {
			req := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptr.To[int64](60)})
			stream, err := req.Stream(ctx)
			if err != nil {
				t.Log(err)
				continue
			}
			var buf bytes.Buffer
			_, _ = io.Copy(&buf, stream)
			_ = stream.Close()
			t.Logf("logs of %s/%s:\n%s", p.Name, c.Name, buf.String())
		}
	}
	events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				t.Logf("event %s/%s %s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
}

func report(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	_, _ = fmt.Fprintf(os.Stderr, "%s e2e: %s\n", time.Now().Format("15:04:05"), msg)
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
