// Package e2e is the end-to-end tier as a library: Setup brings up a cluster
// (kind through its Go API, or an existing one) with the operator deployed
// from its kustomize manifests, and each spec (CreateSpec, ScaleSpec, ...)
// drives one scenario against real kubelets, StatefulSets, DNS, volumes and
// etcd pods, checking conditions, status and data through etcd's own client
// over a port-forward. The _test.go files behind the e2e build tag are thin.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// Options describe the environment.
type Options struct {
	// Cluster options: node image, kind config, keep, existing.
	Cluster cluster.Options
	// OperatorImage, EtcdImage and EtcdUpgradeFrom are loaded into the
	// cluster; the operator is deployed with OperatorImage.
	OperatorImage, EtcdImage, EtcdUpgradeFrom string
	// S3ServerImage is an S3-compatible server (versitygw) the backup spec
	// runs in its namespace; loaded when set.
	S3ServerImage string
	// OperatorArgs are appended to the manager's arguments (for example
	// --max-concurrent-reconciles=4).
	OperatorArgs []string
	// Manifests is the operator's kustomization (operator/config/default).
	Manifests string
	// Log receives progress lines.
	Log io.Writer
}

// Defaults of OptionsFromEnv (and of the gauntlet CLI's flags): what
// make images and make node-image build.
const (
	DefaultNodeImage       = cluster.DefaultNodeImage
	DefaultKindConfig      = cluster.DefaultKindConfig
	DefaultEtcdImage       = "gauntlet.dev/etcd:v3.6.16"
	DefaultEtcdUpgradeFrom = "gauntlet.dev/etcd:v3.6.15"
	DefaultS3ServerImage   = "gauntlet.dev/versitygw:v1.8.0"
)

// OptionsFromEnv reads the options make test-e2e (and test-chaos) pass in
// the environment: GAUNTLET_NODE_IMAGE, GAUNTLET_KIND_CONFIG (relative to
// the repository), OPERATOR_IMAGE, ETCD_IMAGE, ETCD_UPGRADE_FROM_IMAGE and S3_SERVER_IMAGE,
// with the defaults above.
func OptionsFromEnv() Options {
	return Options{
		Cluster: cluster.Options{
			NodeImage:  Getenv("GAUNTLET_NODE_IMAGE", DefaultNodeImage),
			ConfigFile: framework.CRDPath(Getenv("GAUNTLET_KIND_CONFIG", DefaultKindConfig)),
		},
		OperatorImage:   os.Getenv("OPERATOR_IMAGE"),
		EtcdImage:       Getenv("ETCD_IMAGE", DefaultEtcdImage),
		EtcdUpgradeFrom: Getenv("ETCD_UPGRADE_FROM_IMAGE", DefaultEtcdUpgradeFrom),
		S3ServerImage:   Getenv("S3_SERVER_IMAGE", DefaultS3ServerImage),
	}
}

// Getenv is os.Getenv with a default for an unset or empty variable.
func Getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// OperatorNamespace is where the default kustomization deploys the operator.
const OperatorNamespace = "gauntlet-system"

// OperatorDeployment is the manager's Deployment in OperatorNamespace.
const OperatorDeployment = "gauntlet-controller-manager"

// Env is a cluster with the operator running.
type Env struct {
	Options
	Cluster   *cluster.Cluster
	Config    *rest.Config
	Client    client.Client
	Clientset kubernetes.Interface
	Scheme    *runtime.Scheme
	// Deployed is what deploying the operator applied and the API server's
	// warnings about it.
	Deployed *cluster.Deployment
}

// Setup creates (or adopts) the cluster, loads the images, deploys the
// operator and waits until it serves its webhook. Every step prints a
// progress line with its duration.
func Setup(ctx context.Context, o Options) (*Env, error) {
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.Manifests == "" {
		o.Manifests = framework.CRDPath("operator/config/default")
	}
	o.Cluster.Log = o.Log
	e := &Env{Options: o}
	c, err := cluster.Start(ctx, o.Cluster)
	if err != nil {
		return nil, err
	}
	e.Cluster = c
	fail := func(err error) (*Env, error) {
		if terr := c.Teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
		return nil, err
	}
	if e.Scheme, err = operator.NewScheme(); err != nil {
		return fail(err)
	}
	if e.Config, e.Client, err = c.Connect(ctx, e.Scheme); err != nil {
		return fail(err)
	}
	if e.Clientset, err = kubernetes.NewForConfig(e.Config); err != nil {
		return fail(err)
	}
	if !c.Existing {
		images := []string{o.OperatorImage, o.EtcdImage, o.EtcdUpgradeFrom}
		if o.S3ServerImage != "" {
			images = append(images, o.S3ServerImage)
		}
		if err := c.LoadImages(ctx, images...); err != nil {
			return fail(err)
		}
	}
	if err := e.deployOperator(ctx); err != nil {
		return fail(err)
	}
	return e, nil
}

// Teardown deletes the cluster (unless kept or existing).
func (e *Env) Teardown() error { return e.Cluster.Teardown() }

func (e *Env) progress(format string, args ...any) {
	_, _ = fmt.Fprintf(e.Log, "%s e2e: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// deployOperator applies the kustomization with the operator image, fails
// on any PodSecurity warning, and waits for the manager to be available.
func (e *Env) deployOperator(ctx context.Context) error {
	start := time.Now()
	objs, err := cluster.RenderKustomization(e.Manifests)
	if err != nil {
		return err
	}
	if cluster.SetImage(objs, "gauntlet.dev/operator", e.OperatorImage) == 0 {
		return fmt.Errorf("no container in %s runs gauntlet.dev/operator", e.Manifests)
	}
	if len(e.OperatorArgs) > 0 {
		cluster.AppendArgs(objs, e.OperatorImage, e.OperatorArgs...)
	}
	d, err := cluster.Deploy(ctx, e.Config, objs, cluster.DeployOptions{})
	if err != nil {
		return err
	}
	e.Deployed = d
	for _, w := range d.Warnings {
		if strings.Contains(w, "PodSecurity") {
			return fmt.Errorf("the API server warned while deploying the operator: %s", w)
		}
	}
	e.progress("applied %d operator objects in %s (%d warnings)", len(d.Applied), time.Since(start).Round(time.Millisecond), len(d.Warnings))
	err = framework.PollFor(ctx, "the operator Deployment to be available", 3*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		dep := &appsv1.Deployment{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: OperatorNamespace, Name: OperatorDeployment}, dep); err != nil {
			return false, err.Error(), nil
		}
		// Rolled out: every replica runs this template (after an upgrade,
		// the old pod is gone) and is available.
		want := ptr.Deref(dep.Spec.Replicas, 1)
		st := dep.Status
		done := st.ObservedGeneration >= dep.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want
		return done, fmt.Sprintf("status %+v", st), nil
	})
	if err != nil {
		return err
	}
	// Available is not enough: the webhook's Service must route to it. A
	// server-side dry run of a valid cluster goes through the webhook. It
	// is a v1alpha1 object, which every release of the operator serves
	// (and which, from v1beta1 on, goes through the conversion webhook too).
	probe := &dbv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe", Namespace: "default"},
		Spec: dbv1alpha1.DatabaseClusterSpec{Replicas: ptr.To[int32](3), Image: e.EtcdImage,
			Storage: dbv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}},
	}
	err = framework.PollFor(ctx, "the operator's webhook to answer", 2*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	e.progress("operator available and its webhook answering after %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// Upgrade deploys another build of the operator over the running one, as a
// user upgrading a release would: it loads image into the cluster and
// applies manifests (a kustomization; operator/config/default when empty)
// with it, then waits as Setup does.
func (e *Env) Upgrade(ctx context.Context, image, manifests string) error {
	if manifests == "" {
		manifests = framework.CRDPath("operator/config/default")
	}
	if !e.Cluster.Existing {
		if err := e.Cluster.LoadImages(ctx, image); err != nil {
			return err
		}
	}
	e.OperatorImage, e.Manifests = image, manifests
	return e.deployOperator(ctx)
}

// OperatorPod returns the running manager pod.
func (e *Env) OperatorPod(ctx context.Context) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(OperatorNamespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp.IsZero() && pods.Items[i].Status.Phase == corev1.PodRunning {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no running operator pod in %s (%d pods)", OperatorNamespace, len(pods.Items))
}

// ScrapeOperator reads the manager's metrics over a port-forward.
func (e *Env) ScrapeOperator(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	p, err := e.OperatorPod(ctx)
	if err != nil {
		return nil, err
	}
	pf, err := framework.ForwardPort(ctx, e.Config, p.Namespace, p.Name, 8080)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	return framework.Scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", pf.Local))
}
