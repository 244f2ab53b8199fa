package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos"
)

// Scenario is one fault against a fresh DatabaseCluster.
type Scenario struct {
	Name string
	// Describe says what the fault is and what must hold.
	Describe string
	// OldImage starts the cluster on the older etcd image (for upgrades).
	OldImage bool
	// Fault resolves its targets on the case and builds the experiment.
	Fault func(ctx context.Context, c *Case, rng *rand.Rand) (*chaos.Experiment, error)
	// During runs once the fault is injected.
	During func(ctx context.Context, c *Case, rng *rand.Rand) error
	// Hold is how long the fault stays (default 20s).
	Hold time.Duration
	// Needs are the kernel features the fault relies on, checked before a
	// cluster is created for it.
	Needs []chaos.Feature
}

// Scenarios is the catalogue, in the order make test-chaos runs it.
var Scenarios = []Scenario{
	{
		Name:     "leader-pod-kill",
		Describe: "the etcd leader's pod is deleted; a new leader is elected and the pod rejoins as the same member",
		Fault: func(ctx context.Context, c *Case, _ *rand.Rand) (*chaos.Experiment, error) {
			l, err := c.Leader(ctx)
			return chaos.PodKill("leader-pod-kill", c.Members(l)), err
		},
	},
	{
		Name:     "minority-pod-kill",
		Describe: "a minority of followers is deleted; quorum holds throughout",
		Fault: func(ctx context.Context, c *Case, rng *rand.Rand) (*chaos.Experiment, error) {
			m, err := c.Minority(ctx, rng)
			return chaos.PodKill("minority-pod-kill", c.Members(m...)), err
		},
	},
	{
		Name:     "container-kill",
		Describe: "a member's etcd container is SIGKILLed in place (the pod stays)",
		Fault: func(ctx context.Context, c *Case, rng *rand.Rand) (*chaos.Experiment, error) {
			pods, err := c.Pods(ctx)
			if err != nil {
				return nil, fmt.Errorf("member pods: %w", err)
			}
			if len(pods) == 0 {
				return nil, fmt.Errorf("no member pods in %s", c.Namespace)
			}
			return chaos.ContainerKill("container-kill", c.Members(pods[rng.IntN(len(pods))]), "etcd"), nil
		},
	},
	{
		Name:     "pod-failure",
		Describe: "a follower's containers are swapped for a pause image for the hold, then restored",
		Fault: func(ctx context.Context, c *Case, rng *rand.Rand) (*chaos.Experiment, error) {
			m, err := c.Minority(ctx, rng)
			return chaos.PodFailure("pod-failure", c.Members(m...), 10*time.Minute), err
		},
	},
	{
		Name:     "leader-partition",
		Describe: "the leader is cut off from every other member; the majority elects a new leader",
		Needs:    []chaos.Feature{chaos.IPSet},
		Fault: func(ctx context.Context, c *Case, _ *rand.Rand) (*chaos.Experiment, error) {
			l, f, err := c.Followers(ctx)
			return chaos.Partition("leader-partition", c.Members(l), c.Members(f...)), err
		},
	},
	{
		Name:     "minority-partition",
		Describe: "a minority of followers is cut off from the rest; quorum holds throughout",
		Needs:    []chaos.Feature{chaos.IPSet},
		Fault: func(ctx context.Context, c *Case, rng *rand.Rand) (*chaos.Experiment, error) {
			m, err := c.Minority(ctx, rng)
			if err != nil {
				return nil, err
			}
			pods, err := c.Pods(ctx)
			rest := slices.DeleteFunc(pods, func(p string) bool { return slices.Contains(m, p) })
			return chaos.Partition("minority-partition", c.Members(m...), c.Members(rest...)), err
		},
	},
	{
		Name:     "leader-bandwidth",
		Describe: "the leader's egress is limited to 1 mbps (tbf)",
		Needs:    []chaos.Feature{chaos.TBF},
		Fault: func(ctx context.Context, c *Case, _ *rand.Rand) (*chaos.Experiment, error) {
			l, err := c.Leader(ctx)
			return chaos.Bandwidth("leader-bandwidth", c.Members(l), "1mbps"), err
		},
	},
	{
		Name:     "leader-delay-100ms",
		Describe: "100 ms of latency on the leader's egress (netem)",
		Needs:    []chaos.Feature{chaos.Netem},
		Fault: func(ctx context.Context, c *Case, _ *rand.Rand) (*chaos.Experiment, error) {
			l, err := c.Leader(ctx)
			return chaos.Delay("leader-delay", c.Members(l), 100*time.Millisecond), err
		},
	},
	{
		Name:     "leader-loss-30",
		Describe: "30% packet loss on the leader's egress (netem)",
		Needs:    []chaos.Feature{chaos.Netem},
		Fault: func(ctx context.Context, c *Case, _ *rand.Rand) (*chaos.Experiment, error) {
			l, err := c.Leader(ctx)
			return chaos.Loss("leader-loss", c.Members(l), 30), err
		},
	},
	{
		Name:     "operator-kill-during-scale-up",
		Describe: "the operator pod is deleted as a 3→5 scale-up is requested; the new operator finishes it",
		Fault: func(ctx context.Context, c *Case, _ *rand.Rand) (*chaos.Experiment, error) {
			p, err := c.Env.OperatorPod(ctx)
			if err != nil {
				return nil, err
			}
			return chaos.PodKill("operator-kill", chaos.Pods{Namespace: p.Namespace, Names: []string{p.Name}}), nil
		},
		During: func(ctx context.Context, c *Case, _ *rand.Rand) error { return c.Scale(ctx, 5) },
	},
	{
		Name:     "operator-apiserver-partition-during-replacement",
		Describe: "the operator cannot reach the API server while a member lost its volume; it replaces the member after the heal",
		Needs:    []chaos.Feature{chaos.IPSet},
		Fault: func(ctx context.Context, c *Case, _ *rand.Rand) (*chaos.Experiment, error) {
			p, err := c.Env.OperatorPod(ctx)
			if err != nil {
				return nil, err
			}
			addrs, err := apiServerAddresses(ctx, c.Env.Client)
			return chaos.PartitionFrom("operator-apiserver", chaos.Pods{Namespace: p.Namespace, Names: []string{p.Name}}, addrs...), err
		},
		During: func(ctx context.Context, c *Case, rng *rand.Rand) error {
			_, f, err := c.Followers(ctx)
			if err != nil {
				return err
			}
			return c.ReplaceMember(ctx, f[rng.IntN(len(f))])
		},
	},
	{
		Name:     "upgrade-under-minority-pod-kill",
		Describe: "a rolling upgrade to the newer etcd image runs while a minority of followers is killed",
		OldImage: true,
		Fault: func(ctx context.Context, c *Case, rng *rand.Rand) (*chaos.Experiment, error) {
			m, err := c.Minority(ctx, rng)
			return chaos.PodKill("upgrade-minority-kill", c.Members(m...)), err
		},
		During: func(ctx context.Context, c *Case, _ *rand.Rand) error { return c.Upgrade(ctx, c.Env.EtcdImage) },
	},
}

// Names lists the scenarios' names.
func Names() []string {
	var out []string
	for _, s := range Scenarios {
		out = append(out, s.Name)
	}
	return out
}

// apiServerAddresses are the API server's Service IP and endpoint IPs: what
// a pod dials to reach it.
func apiServerAddresses(ctx context.Context, c client.Client) ([]string, error) {
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc); err != nil {
		return nil, err
	}
	addrs := []string{svc.Spec.ClusterIP}
	eps := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, eps, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return nil, err
	}
	for _, s := range eps.Items {
		for _, ep := range s.Endpoints {
			addrs = append(addrs, ep.Addresses...)
		}
	}
	return addrs, nil
}
