package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/chaosmesh"
	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// needs are the kernel features an action relies on: those of the
// experiment the builder makes for it (no pod needed to ask).
func needs(action string) []chaosmesh.Feature {
	exp, err := build("needs", scenario.Fault{Action: action}, chaosmesh.Pods{}, chaosmesh.Pods{}, nil)
	if err != nil {
		return nil
	}
	return exp.Needs
}

// experiment builds the fault on the roles' pods as they are now.
func (r *run) experiment(ctx context.Context, f scenario.Fault) (*chaosmesh.Experiment, error) {
	if scenario.IsViewAction(f.Action) {
		return r.viewExperiment(ctx, f)
	}
	if f.Action == scenario.ActionNone {
		nothing := func(context.Context) error { return nil }
		return &chaosmesh.Experiment{Harness: &chaosmesh.HarnessFault{Name: r.s.Metadata.Name, Kind: "none", Inject: nothing, Recover: nothing}}, nil
	}
	if h := r.e.host; h != nil && f.Action == scenario.ActionPodKill && r.s.Spec.Roles[f.Target].Operator {
		return &chaosmesh.Experiment{Targets: []chaosmesh.Pods{h.Target()}, Harness: &chaosmesh.HarnessFault{Name: r.s.Metadata.Name, Kind: "Process/kill",
			Inject: func(context.Context) error { return h.Kill() }, Recover: func(context.Context) error { return nil }}}, nil
	}
	roles := r.roles.snapshot()
	r.faultRoles = roles
	target, err := roles.pods(ctx, f.Target)
	if err != nil {
		return nil, err
	}
	var peer chaosmesh.Pods
	var addrs []string
	if f.Action == scenario.ActionPartition {
		if r.s.Spec.Roles[f.Peer].APIServer {
			addrs, err = r.roles.apiServerAddresses(ctx)
		} else {
			peer, err = roles.pods(ctx, f.Peer)
		}
		if err != nil {
			return nil, err
		}
	}
	var exp *chaosmesh.Experiment
	switch {
	case f.Action == scenario.ActionNodeLoss:
		exp, err = r.nodeLoss(ctx, target)
	case f.Action == scenario.ActionPodKill && r.e.host != nil:
		exp = r.simulatedPodLoss(target)
	default:
		exp, err = build(r.s.Metadata.Name, f, target, peer, addrs)
	}
	if err == nil {
		r.targets = exp.Targets
	}
	return exp, err
}

// simulatedPodLoss is a pod kill on envtest, where the harness plays the
// StatefulSet controller: the target pods are deleted at once and made
// again only at the heal, so that the operator meets, for the whole hold,
// the window a cluster's controller leaves between a pod's loss and its
// replacement.
func (r *run) simulatedPodLoss(target chaosmesh.Pods) *chaosmesh.Experiment {
	h := r.e.host
	return &chaosmesh.Experiment{
		Targets: []chaosmesh.Pods{target},
		Harness: &chaosmesh.HarnessFault{
			Name: r.s.Metadata.Name,
			Kind: "Pod/delete, made again at the heal",
			Inject: func(ctx context.Context) error {
				return h.LosePods(ctx, target.Namespace, target.Names...)
			},
			Recover: func(context.Context) error {
				h.RestorePods(target.Namespace, target.Names...)
				return nil
			},
		},
	}
}

// nodeLossMissing is why a node-loss cannot run here, or "" when it can,
// known before the resource is made: only the nodes of a kind cluster the
// harness created are its to stop (envtest has no cluster, an existing
// one's are not its own), and only a worker node's. runOnce asks it of
// each node-loss scenario, so that nodeLoss need not.
func (e *Engine) nodeLossMissing(ctx context.Context) (string, error) {
	if e.host != nil || e.Cluster == nil || e.Cluster.Existing {
		return nodeLossNeedsKind, nil
	}
	nodes := &corev1.NodeList{}
	if err := e.Client.List(ctx, nodes); err != nil {
		return "", fmt.Errorf("listing the nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if _, cp := n.Labels[controlPlaneLabel]; !cp {
			return "", nil
		}
	}
	return "node-loss needs a worker node, and this cluster has only its control plane: run on the multi-node cluster (--multi-node, MULTI_NODE=1)", nil
}

const (
	nodeLossNeedsKind = "node-loss stops a kind node's container: it needs a kind cluster the harness created (not envtest, not an existing cluster)"
	controlPlaneLabel = "node-role.kubernetes.io/control-plane"
)

// nodeLoss stops the nodes the target pods run on for the hold, then
// starts them again, on a kind cluster the harness made (nodeLossMissing
// said so before the run began). It never stops a control plane (the API
// server would go too): a target pod there skips the scenario.
func (r *run) nodeLoss(ctx context.Context, target chaosmesh.Pods) (*chaosmesh.Experiment, error) {
	var nodes []string
	for _, name := range target.Names {
		var p corev1.Pod
		if err := r.e.Client.Get(ctx, client.ObjectKey{Namespace: target.Namespace, Name: name}, &p); err != nil {
			return nil, err
		}
		var n corev1.Node
		if err := r.e.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n); err != nil {
			return nil, fmt.Errorf("the node of pod %s: %w", name, err)
		}
		if _, cp := n.Labels[controlPlaneLabel]; cp {
			return nil, chaosmesh.Skip(fmt.Sprintf("node-loss needs the target on a worker node, and %s runs on the control plane %s: run on the multi-node cluster (--multi-node, MULTI_NODE=1)", name, n.Name))
		}
		if !slices.Contains(nodes, n.Name) {
			nodes = append(nodes, n.Name)
		}
	}
	cl := r.e.Cluster
	return &chaosmesh.Experiment{
		Targets: []chaosmesh.Pods{target},
		Harness: &chaosmesh.HarnessFault{
			Name: r.s.Metadata.Name,
			Kind: "Node/stop",
			Inject: func(ctx context.Context) error {
				for _, n := range nodes {
					if err := cl.StopNode(ctx, n); err != nil {
						return err
					}
				}
				return nil
			},
			Recover: func(ctx context.Context) error {
				var errs []error
				for _, n := range nodes {
					errs = append(errs, cl.StartNode(ctx, n))
				}
				return errors.Join(errs...)
			},
		},
	}, nil
}

// podFailureMax is how long Chaos Mesh keeps a pod-failure at most: the
// engine ends it at the hold's end by deleting the experiment, so this only
// bounds a failure whose run was cut short (no hold is longer).
const podFailureMax = 10 * time.Minute

// build makes the experiment of a fault on resolved targets: a partition
// cuts target off from peer's pods, or from addrs when they are given.
func build(name string, f scenario.Fault, target, peer chaosmesh.Pods, addrs []string) (*chaosmesh.Experiment, error) {
	switch f.Action {
	case scenario.ActionPodKill:
		return chaosmesh.PodKill(name, target), nil
	case scenario.ActionContainerKill:
		return chaosmesh.ContainerKill(name, target, f.Container), nil
	case scenario.ActionPodFailure:
		return chaosmesh.PodFailure(name, target, podFailureMax), nil
	case scenario.ActionBandwidth:
		return chaosmesh.Bandwidth(name, target, f.Rate), nil
	case scenario.ActionDelay:
		return chaosmesh.Delay(name, target, f.Latency.Duration), nil
	case scenario.ActionLoss:
		return chaosmesh.Loss(name, target, f.LossPercent), nil
	case scenario.ActionPartition:
		if addrs != nil {
			return chaosmesh.PartitionFrom(name, target, addrs...), nil
		}
		return chaosmesh.Partition(name, target, peer), nil
	}
	return nil, fmt.Errorf("unknown action %q", f.Action)
}

// during takes the scenario's actions in order.
func (r *run) during(ctx context.Context, _ *rand.Rand) error {
	if r.command != nil {
		r.startCommand(ctx, r.s.Spec.Workload.Command)
	}
	return r.actions(ctx, "during", r.s.Spec.During)
}

// actions takes a list of the scenario's actions (before or during) in
// order.
func (r *run) actions(ctx context.Context, list string, actions []scenario.Action) error {
	for i, a := range actions {
		switch {
		case a.Recreate:
			if err := r.recreate(ctx); err != nil {
				return fmt.Errorf("%s[%d]: recreating the resource: %w", list, i, err)
			}
		case a.Patch != nil:
			raw, err := json.Marshal(a.Patch)
			if err != nil {
				return err
			}
			patch := []byte(r.vars.Expand(string(raw)))
			err = framework.PollFor(ctx, fmt.Sprintf("the API server to accept %s[%d]'s patch", list, i), patchAdmissionWait, time.Second, func(ctx context.Context) (bool, string, error) {
				patched, err := r.resource().Patch(ctx, r.obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
				if err == nil {
					r.wroteRV = patched.GetResourceVersion()
				}
				switch {
				case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
					// Refused by the schema, a CEL rule or a webhook:
					// asking again gets the same answer.
					return false, "", fmt.Errorf("the API server refused %s[%d]'s patch: %w", list, i, err)
				case err != nil:
					return false, err.Error(), nil
				}
				return true, "", nil
			})
			if err != nil {
				return err
			}
		case a.Converge:
			if err := r.waitConverged(ctx); err != nil {
				return fmt.Errorf("%s[%d]: %w", list, i, err)
			}
			r.followsAt(ctx, fmt.Sprintf("%s[%d]", list, i))
			r.statusAt(ctx, fmt.Sprintf("%s[%d]", list, i))
		case a.DeletePods != nil:
			pods, err := r.roles.pods(ctx, a.DeletePods.Role)
			if err != nil {
				return err
			}
			for _, name := range pods.Names {
				if err := r.deletePod(ctx, pods.Namespace, name, a.DeletePods.WithClaims); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// recreate deletes the resource, waits until it is gone (the operator's
// finalizers done; at most its convergence bound), creates it again from
// the manifest and waits until it converged. It records the
// resourceVersion at which the old object was first seen marked for
// deletion: a stale view "as of the deletion" reads there.
func (r *run) recreate(ctx context.Context) error {
	name := r.obj.GetName()
	cur, err := r.resource().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	w, err := r.resource().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cur.GetResourceVersion()})
	if err != nil {
		return err
	}
	defer w.Stop()
	if err := r.resource().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	within := r.convergeWithin()
	timeout := time.After(within)
	r.deletedRV = ""
	for gone := false; !gone; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return fmt.Errorf("%s was not gone %s after its deletion (a finalizer left?)", name, within)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the watch on the resource ended before it was gone")
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj {
				continue
			}
			if r.deletedRV == "" && u.GetDeletionTimestamp() != nil {
				r.deletedRV = u.GetResourceVersion()
			}
			gone = ev.Type == watch.Deleted
		}
	}
	start := time.Now()
	objs, err := render.Objects(scenario.Beside(filepath.Dir(r.e.o.Set.Files[r.s.Metadata.Name]), r.s.Spec.Resource.Manifest), r.vars)
	if err != nil {
		return err
	}
	obj := objs[0]
	obj.SetNamespace(r.ns)
	created, err := r.resource().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	r.obj, r.wroteRV = created, created.GetResourceVersion()
	if err := r.waitConverged(ctx); err != nil {
		return err
	}
	r.e.logf("%s: recreated %s (old one marked for deletion at resourceVersion %s), converged in %s",
		r.s.Metadata.Name, name, r.deletedRV, time.Since(start).Round(time.Millisecond))
	return nil
}

// deletePod deletes a pod, and first its claims when asked, so that it
// comes back with an empty volume.
func (r *run) deletePod(ctx context.Context, ns, name string, claims bool) error {
	p := &corev1.Pod{}
	if err := r.e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	var errs []error
	if claims {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v.PersistentVolumeClaim.ClaimName}}
				errs = append(errs, client.IgnoreNotFound(r.e.Client.Delete(ctx, pvc)))
			}
		}
	}
	errs = append(errs, client.IgnoreNotFound(r.e.Client.Delete(ctx, p)))
	return errors.Join(errs...)
}
