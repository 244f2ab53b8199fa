package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos"
	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
)

// Options describe a chaos environment: the e2e environment (cluster,
// operator, etcd images) plus Chaos Mesh.
type Options struct {
	E2E   e2e.Options
	Chaos install.Options
}

// Env is the e2e environment with Chaos Mesh installed and a runner.
type Env struct {
	*e2e.Env
	// Client knows the operator's and Chaos Mesh's types.
	Client  client.Client
	Dynamic dynamic.Interface
	Runner  *chaos.Runner
	Log     io.Writer
	seq     int
}

// Setup brings up the e2e environment, loads the Chaos Mesh images into a
// kind cluster, installs Chaos Mesh and waits until it answers.
func Setup(ctx context.Context, o Options) (*Env, error) {
	if o.E2E.Log == nil {
		o.E2E.Log = os.Stderr
	}
	base, err := e2e.Setup(ctx, o.E2E)
	if err != nil {
		return nil, err
	}
	e := &Env{Env: base, Log: o.E2E.Log}
	fail := func(err error) (*Env, error) {
		_ = base.Teardown()
		return nil, err
	}
	if err := chaosv1alpha1.AddToScheme(base.Scheme); err != nil {
		return fail(err)
	}
	if e.Client, err = client.New(base.Config, client.Options{Scheme: base.Scheme}); err != nil {
		return fail(err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(base.Config); err != nil {
		return fail(err)
	}
	if !base.Cluster.Existing {
		if err := base.Cluster.LoadImages(ctx, o.Chaos.ControllerImage, o.Chaos.DaemonImage); err != nil {
			return fail(err)
		}
	}
	o.Chaos.Log = o.E2E.Log
	inst, err := install.Install(ctx, base.Config, o.Chaos)
	if err != nil {
		return fail(fmt.Errorf("installing Chaos Mesh: %w", err))
	}
	e.Runner = &chaos.Runner{Config: base.Config, Client: e.Client, ChaosNamespace: inst.Namespace, Log: o.E2E.Log}
	feats, err := e.Runner.Features(ctx)
	if err != nil {
		return fail(fmt.Errorf("probing the node kernel: %w", err))
	}
	var have []string
	for f, ferr := range feats {
		have = append(have, fmt.Sprintf("%s=%v", f, ferr == nil))
	}
	e.progress("Chaos Mesh installed in %s; kernel offers %s", inst.Duration.Round(time.Millisecond), strings.Join(have, " "))
	return e, nil
}

func (e *Env) progress(format string, args ...any) {
	_, _ = fmt.Fprintf(e.Log, "%s chaos: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// namespace creates a namespace for one case, labelled for the restricted
// Pod Security Standard like the operator's.
func (e *Env) namespace(ctx context.Context, name string) (string, error) {
	e.seq++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("chaos-%s-%d", name, e.seq),
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"},
	}}
	if len(ns.Name) > 63 {
		ns.Name = ns.Name[:63]
	}
	return ns.Name, e.Client.Create(ctx, ns)
}
