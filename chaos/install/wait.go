package install

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/cluster/podstate"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// pollInterval paces every wait of Install and Uninstall.
const pollInterval = 500 * time.Millisecond

// version is what an apply can change of an object, as its metadata shows.
type version struct {
	exists          bool
	resourceVersion string
	generation      int64
	meta            string // labels and annotations
}

// versions reads the metadata of every object in objs (absent ones have
// exists false).
func versions(ctx context.Context, c client.Reader, objs []*unstructured.Unstructured) (map[string]version, error) {
	out := make(map[string]version, len(objs))
	for _, u := range objs {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(u), m)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			out[objectKey(u)] = version{}
			continue
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", objectKey(u), err)
		}
		out[objectKey(u)] = version{
			exists:          true,
			resourceVersion: m.ResourceVersion,
			generation:      m.Generation,
			meta:            fmt.Sprint(sorted(m.Labels), sorted(m.Annotations)),
		}
	}
	return out, nil
}

func sorted(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// hasStatus are the kinds whose status controllers keep writing: their
// resourceVersion moves without any apply, so a change is a new generation
// (spec) or new labels or annotations.
var hasStatus = map[string]bool{"CustomResourceDefinition": true, "Deployment": true, "DaemonSet": true}

// changed lists, in key order, the objects an apply created or modified
// between the two readings.
func changed(before, after map[string]version) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(after)) {
		b, a := before[key], after[key]
		kind, _, _ := strings.Cut(key, "/")
		switch {
		case !b.exists && a.exists:
			out = append(out, key+" (created)")
		case hasStatus[kind] && (a.generation != b.generation || a.meta != b.meta):
			out = append(out, key)
		case !hasStatus[kind] && a.resourceVersion != b.resourceVersion:
			out = append(out, key)
		}
	}
	return out
}

func selector(component string) client.MatchingLabels {
	return client.MatchingLabels{"app.kubernetes.io/name": "chaos-mesh", "app.kubernetes.io/component": component}
}

// waitController waits until the controller Deployment has rolled out and
// is available.
func waitController(ctx context.Context, c client.Client, ns string, guard *podstate.Guard) (string, error) {
	what := fmt.Sprintf("Deployment %s/%s to be available", ns, ControllerDeployment)
	var summary string
	err := framework.Poll(ctx, what, pollInterval, func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ControllerDeployment}, d); err != nil {
			return false, err.Error(), nil
		}
		ok, s := deploymentReady(d)
		summary = s
		if err := guard.Check(ctx); err != nil && !ok {
			return false, "", err
		}
		return settled(ctx, c, ns, "controller-manager", ok, s)
	})
	return summary, err
}

// deploymentReady: the newest template rolled out to every replica, no old
// pod left, all available.
func deploymentReady(d *appsv1.Deployment) (bool, string) {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	msg := fmt.Sprintf("deployment %s: %d/%d available, %d updated, %d total, generation %d observed %d",
		d.Name, s.AvailableReplicas, want, s.UpdatedReplicas, s.Replicas, d.Generation, s.ObservedGeneration)
	available := false
	for _, cond := range s.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
			available = true
		}
	}
	return available && s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want &&
		s.Replicas == want && s.AvailableReplicas == want, msg
}

// waitDaemons waits until the DaemonSet has rolled out and its pods are
// ready on every schedulable node.
func waitDaemons(ctx context.Context, c client.Client, ns string, guard *podstate.Guard) (string, error) {
	what := fmt.Sprintf("DaemonSet %s/%s to be ready on every schedulable node", ns, DaemonSet)
	var summary string
	err := framework.Poll(ctx, what, pollInterval, func(ctx context.Context) (bool, string, error) {
		nodes := &corev1.NodeList{}
		if err := c.List(ctx, nodes); err != nil {
			return false, err.Error(), nil
		}
		ds := &appsv1.DaemonSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: DaemonSet}, ds); err != nil {
			return false, err.Error(), nil
		}
		ok, s := daemonSetReady(ds, schedulableNodes(nodes.Items))
		summary = s
		if err := guard.Check(ctx); err != nil && !ok {
			return false, "", err
		}
		return settled(ctx, c, ns, "chaos-daemon", ok, s)
	})
	return summary, err
}

// schedulableNodes counts the Ready nodes that are not cordoned and carry
// no NoSchedule or NoExecute taint: a DaemonSet without tolerations runs
// at least there.
func schedulableNodes(nodes []corev1.Node) int {
	n := 0
	for _, node := range nodes {
		if node.Spec.Unschedulable {
			continue
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		tainted := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		})
		if ready && !tainted {
			n++
		}
	}
	return n
}

// daemonSetReady: the newest template on every node it should run on
// (at least the schedulable ones), every pod ready.
func daemonSetReady(ds *appsv1.DaemonSet, schedulable int) (bool, string) {
	s := ds.Status
	msg := fmt.Sprintf("daemonset %s: %d/%d ready, %d updated, %d available, %d schedulable nodes, generation %d observed %d",
		ds.Name, s.NumberReady, s.DesiredNumberScheduled, s.UpdatedNumberScheduled, s.NumberAvailable, schedulable, ds.Generation, s.ObservedGeneration)
	return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled > 0 && s.DesiredNumberScheduled >= int32(schedulable) &&
		s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled &&
		s.NumberAvailable == s.DesiredNumberScheduled && s.NumberUnavailable == 0, msg
}

// webhookProbe is a valid PodChaos that selects nothing; creating it as a
// server-side dry run goes through the mutating, validating and
// authorization webhooks and stores nothing.
func webhookProbe(ns string) *chaosv1alpha1.PodChaos {
	return &chaosv1alpha1.PodChaos{
		ObjectMeta: metav1.ObjectMeta{Name: "gauntlet-webhook-probe", Namespace: ns},
		Spec: chaosv1alpha1.PodChaosSpec{
			Action: chaosv1alpha1.PodKillAction,
			ContainerSelector: chaosv1alpha1.ContainerSelector{
				PodSelector: chaosv1alpha1.PodSelector{
					Mode: chaosv1alpha1.OneMode,
					Selector: chaosv1alpha1.PodSelectorSpec{
						GenericSelectorSpec: chaosv1alpha1.GenericSelectorSpec{
							Namespaces:     []string{ns},
							LabelSelectors: map[string]string{"gauntlet.dev/webhook-probe": "selects-nothing"},
						},
					},
				},
			},
		},
	}
}

// waitWebhook retries a dry-run create of webhookProbe until the webhooks
// answer it.
func waitWebhook(ctx context.Context, c client.Client, ns string) (string, error) {
	tries := 0
	err := framework.Poll(ctx, "the Chaos Mesh admission webhooks to answer a dry-run PodChaos", pollInterval, func(ctx context.Context) (bool, string, error) {
		tries++
		if err := c.Create(ctx, webhookProbe(ns), client.DryRunAll); err != nil {
			return false, err.Error() + "\n" + podsState(ctx, c, ns, "controller-manager"), nil
		}
		return true, "", nil
	})
	return fmt.Sprintf("a dry-run PodChaos went through the webhooks (attempt %d)", tries), err
}

// settled completes a workload's readiness: once its status is ready, no
// pod of the component may still be terminating (after new certificates,
// the old pods hold the old ones until they are gone).
func settled(ctx context.Context, c client.Reader, ns, component string, ready bool, status string) (bool, string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), selector(component)); err != nil {
		return false, status + "\nlisting pods: " + err.Error(), nil
	}
	terminating := slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if ready && !terminating {
		return true, status, nil
	}
	return false, status + "\n" + describePods(pods.Items), nil
}

// podsState describes the pods of a component for a timeout message.
func podsState(ctx context.Context, c client.Reader, ns, component string) string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), selector(component)); err != nil {
		return "listing pods: " + err.Error()
	}
	return describePods(pods.Items)
}

// describePods says, per pod, its phase and node and what each container
// waits for or why it ended.
func describePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no pods"
	}
	var lines []string
	for _, p := range pods {
		line := fmt.Sprintf("pod %s: %s", p.Name, p.Status.Phase)
		if p.Spec.NodeName != "" {
			line += " on " + p.Spec.NodeName
		}
		if p.DeletionTimestamp != nil {
			line += ", terminating"
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
				line += fmt.Sprintf(", unschedulable: %s", cond.Message)
			}
		}
		for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			line += fmt.Sprintf("; container %s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			switch {
			case cs.State.Waiting != nil:
				line += fmt.Sprintf(" waiting: %s %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				line += fmt.Sprintf(" terminated: %s exit %d %s", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				line += fmt.Sprintf(" (last: %s exit %d)", t.Reason, t.ExitCode)
			}
		}
		lines = append(lines, strings.TrimSpace(line))
	}
	return strings.Join(lines, "\n")
}
