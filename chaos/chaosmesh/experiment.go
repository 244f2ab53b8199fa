package chaosmesh

import (
	"context"
	"fmt"
	"slices"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pods is a set of pods named explicitly, the usual result of resolving a
// role ("the leader") against the live cluster just before injection.
type Pods struct {
	Namespace string
	Names     []string
}

func (p Pods) selector() chaosv1alpha1.PodSelector {
	return chaosv1alpha1.PodSelector{
		Mode: chaosv1alpha1.AllMode,
		Selector: chaosv1alpha1.PodSelectorSpec{
			GenericSelectorSpec: chaosv1alpha1.GenericSelectorSpec{Namespaces: []string{p.Namespace}},
			Pods:                map[string][]string{p.Namespace: slices.Clone(p.Names)},
		},
	}
}

func (p Pods) String() string { return fmt.Sprintf("%s/%v", p.Namespace, p.Names) }

// Feature is something the node's kernel must offer for an experiment.
type Feature string

// Kernel features the runner probes before injecting.
const (
	// Netem is the netem qdisc (NetworkChaos delay, loss, duplicate, corrupt).
	Netem Feature = "netem"
	// TBF is the token bucket filter qdisc (NetworkChaos bandwidth).
	TBF Feature = "tbf"
	// IPSet is ipset with iptables' set match (NetworkChaos partition).
	IPSet Feature = "ipset"
)

// Experiment is one fault, ready to create.
type Experiment struct {
	// Object is the PodChaos or NetworkChaos to create; nil for a fault
	// the harness makes itself (Harness).
	Object client.Object
	// Harness is a fault made without Chaos Mesh, such as a node stopped.
	Harness *HarnessFault
	// Targets are the pods whose injection Chaos Mesh must report.
	Targets []Pods
	// Needs lists the kernel features the fault relies on.
	Needs []Feature
	// NetworkRules is true when the fault writes iptables rules in the
	// targets' network namespaces, which must be gone after recovery.
	NetworkRules bool
}

// HarnessFault is a fault the harness injects and recovers itself.
type HarnessFault struct {
	// Name names the fault in logs, like a chaos object's name.
	Name string
	// Kind is what the report calls it, e.g. "Node/stop".
	Kind string
	// Inject makes the fault; it returns once the fault is in force.
	Inject func(ctx context.Context) error
	// Recover undoes it; it returns once every target is back in the
	// fault-free state the harness can tell (a node's container running).
	Recover func(ctx context.Context) error
}

// Name is the chaos object's name.
func (e *Experiment) Name() string {
	if e.Harness != nil {
		return e.Harness.Name
	}
	return e.Object.GetName()
}

// Kind is the chaos object's kind and action, e.g. "PodChaos/pod-kill".
func (e *Experiment) Kind() string {
	if e.Harness != nil {
		return e.Harness.Kind
	}
	switch o := e.Object.(type) {
	case *chaosv1alpha1.PodChaos:
		return "PodChaos/" + string(o.Spec.Action)
	case *chaosv1alpha1.NetworkChaos:
		return "NetworkChaos/" + string(o.Spec.Action)
	}
	return fmt.Sprintf("%T", e.Object)
}

func chaosMeta(name string, p Pods) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "gauntlet"}}
}

func durationString(d time.Duration) *string {
	if d <= 0 {
		return nil
	}
	s := d.String()
	return &s
}

// PodKill deletes the target pods (their controller recreates them).
func PodKill(name string, target Pods) *Experiment {
	return &Experiment{
		Object: &chaosv1alpha1.PodChaos{ObjectMeta: chaosMeta(name, target), Spec: chaosv1alpha1.PodChaosSpec{
			ContainerSelector: chaosv1alpha1.ContainerSelector{PodSelector: target.selector()},
			Action:            chaosv1alpha1.PodKillAction,
		}},
		Targets: []Pods{target},
	}
}

// ContainerKill sends SIGKILL to the named containers of the target pods
// (the kubelet restarts them in the same pod).
func ContainerKill(name string, target Pods, containers ...string) *Experiment {
	return &Experiment{
		Object: &chaosv1alpha1.PodChaos{ObjectMeta: chaosMeta(name, target), Spec: chaosv1alpha1.PodChaosSpec{
			ContainerSelector: chaosv1alpha1.ContainerSelector{PodSelector: target.selector(), ContainerNames: containers},
			Action:            chaosv1alpha1.ContainerKillAction,
		}},
		Targets: []Pods{target},
	}
}

// PodFailure replaces the target pods' containers with a pause image for d
// (the pod stays, its process does not run).
func PodFailure(name string, target Pods, d time.Duration) *Experiment {
	return &Experiment{
		Object: &chaosv1alpha1.PodChaos{ObjectMeta: chaosMeta(name, target), Spec: chaosv1alpha1.PodChaosSpec{
			ContainerSelector: chaosv1alpha1.ContainerSelector{PodSelector: target.selector()},
			Action:            chaosv1alpha1.PodFailureAction,
			Duration:          durationString(d),
		}},
		Targets: []Pods{target},
	}
}

// Partition cuts traffic both ways between from and to (iptables and
// ipsets in the pods' network namespaces).
func Partition(name string, from, to Pods) *Experiment {
	t := to.selector()
	return &Experiment{
		Object: &chaosv1alpha1.NetworkChaos{ObjectMeta: chaosMeta(name, from), Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector: from.selector(),
			Action:      chaosv1alpha1.PartitionAction,
			Direction:   chaosv1alpha1.Both,
			Target:      &t,
		}},
		Targets:      []Pods{from, to},
		Needs:        []Feature{IPSet},
		NetworkRules: true,
	}
}

// PartitionFrom cuts the target pods' outgoing traffic to the given
// addresses (IPs or CIDRs outside the cluster's pods, such as the API
// server's).
func PartitionFrom(name string, from Pods, addresses ...string) *Experiment {
	return &Experiment{
		Object: &chaosv1alpha1.NetworkChaos{ObjectMeta: chaosMeta(name, from), Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector:     from.selector(),
			Action:          chaosv1alpha1.PartitionAction,
			Direction:       chaosv1alpha1.To,
			ExternalTargets: slices.Clone(addresses),
		}},
		Targets:      []Pods{from},
		Needs:        []Feature{IPSet},
		NetworkRules: true,
	}
}

// Bandwidth limits the target pods' egress to rate (for example "1mbps"),
// with no target filter: Chaos Mesh builds a filtered limit from prio and
// sfq qdiscs, which not every kernel has.
func Bandwidth(name string, target Pods, rate string) *Experiment {
	return &Experiment{
		Object: &chaosv1alpha1.NetworkChaos{ObjectMeta: chaosMeta(name, target), Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector: target.selector(),
			Action:      chaosv1alpha1.BandwidthAction,
			Direction:   chaosv1alpha1.To,
			TcParameter: chaosv1alpha1.TcParameter{Bandwidth: &chaosv1alpha1.BandwidthSpec{Rate: rate, Limit: 20971520, Buffer: 10000}},
		}},
		Targets: []Pods{target},
		Needs:   []Feature{TBF},
	}
}

// Delay adds latency to the target pods' egress (netem).
func Delay(name string, target Pods, latency time.Duration) *Experiment {
	return &Experiment{
		Object: &chaosv1alpha1.NetworkChaos{ObjectMeta: chaosMeta(name, target), Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector: target.selector(),
			Action:      chaosv1alpha1.DelayAction,
			Direction:   chaosv1alpha1.To,
			TcParameter: chaosv1alpha1.TcParameter{Delay: &chaosv1alpha1.DelaySpec{Latency: latency.String()}},
		}},
		Targets: []Pods{target},
		Needs:   []Feature{Netem},
	}
}

// Loss drops percent of the target pods' egress packets (netem).
func Loss(name string, target Pods, percent int) *Experiment {
	return &Experiment{
		Object: &chaosv1alpha1.NetworkChaos{ObjectMeta: chaosMeta(name, target), Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector: target.selector(),
			Action:      chaosv1alpha1.LossAction,
			Direction:   chaosv1alpha1.To,
			TcParameter: chaosv1alpha1.TcParameter{Loss: &chaosv1alpha1.LossSpec{Loss: fmt.Sprint(percent)}},
		}},
		Targets: []Pods{target},
		Needs:   []Feature{Netem},
	}
}
