package budget

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// readTimeout bounds the reads behind one judged deletion: the operator's
// request waits for them.
const readTimeout = 5 * time.Second

// Guard is the disruption-budget oracle. As the operator asks to
// delete a pod, before the request goes on, it reads the pods and the
// PodDisruptionBudgets of the resource's namespace: deleting a healthy
// pod that leaves fewer healthy pods than a budget covering it keeps
// breaks that budget, the operator's own (or its user's). A roll that
// deletes every member at once does; one that waits for each to be ready
// again does not. A budget that allows no disruption even with every pod
// healthy (minAvailable equal to the pods) is not judged: every roll
// breaks it, and Kubernetes' own drain would wait for ever.
type Guard struct {
	Client client.Client
	// Namespace is the resource's: the pods and budgets judged.
	Namespace string

	mu        sync.Mutex
	judged    int
	violation string
}

// Watch judges the operator's pod deletions from now until the returned
// function is called.
func (g *Guard) Watch(p *apiproxy.Proxy) (stop func()) {
	p.BeforeWrite(func(i apiproxy.Info) {
		if i.Verb != "delete" || i.Resource != "pods" || i.Subresource != "" || i.Namespace != g.Namespace || i.Name == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		why, err := g.judge(ctx, i.Name)
		g.mu.Lock()
		defer g.mu.Unlock()
		if err == nil {
			g.judged++
		}
		if why != "" && g.violation == "" {
			g.violation = why
		}
	})
	return func() { p.BeforeWrite(nil) }
}

func (g *Guard) judge(ctx context.Context, pod string) (string, error) {
	pods := &corev1.PodList{}
	if err := g.Client.List(ctx, pods, client.InNamespace(g.Namespace)); err != nil {
		return "", err
	}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := g.Client.List(ctx, pdbs, client.InNamespace(g.Namespace)); err != nil {
		return "", err
	}
	if len(pdbs.Items) == 0 {
		return "", nil
	}
	scale := map[types.UID]int{}
	sets := &appsv1.StatefulSetList{}
	if err := g.Client.List(ctx, sets, client.InNamespace(g.Namespace)); err != nil {
		return "", err
	}
	for _, s := range sets.Items {
		scale[s.UID] = int(ptr.Deref(s.Spec.Replicas, 1))
	}
	replicaSets := &appsv1.ReplicaSetList{}
	if err := g.Client.List(ctx, replicaSets, client.InNamespace(g.Namespace)); err != nil {
		return "", err
	}
	for _, s := range replicaSets.Items {
		scale[s.UID] = int(ptr.Deref(s.Spec.Replicas, 1))
	}
	return budgetBroken(pod, pods.Items, pdbs.Items, scale), nil
}

// budgetBroken says which budget deleting the named pod breaks, or "".
// scale holds the replicas of the pods' controllers (StatefulSets,
// ReplicaSets) by UID: the pods a budget expects are its pods'
// controllers' scale, as the disruption controller counts them, so a pod
// already gone and not yet replaced is still expected.
func budgetBroken(name string, pods []corev1.Pod, pdbs []policyv1.PodDisruptionBudget, scale map[types.UID]int) string {
	var target *corev1.Pod
	for i := range pods {
		if pods[i].Name == name {
			target = &pods[i]
		}
	}
	if target == nil || !healthy(target) {
		return "" // gone, going, or not ready: its deletion disrupts nothing
	}
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(target.Labels)) {
			continue
		}
		expected, ready := 0, 0
		controllers := map[types.UID]bool{}
		for i := range pods {
			if p := &pods[i]; sel.Matches(labels.Set(p.Labels)) {
				expected++
				if healthy(p) {
					ready++
				}
				if ref := metav1.GetControllerOf(p); ref != nil {
					controllers[ref.UID] = true
				}
			}
		}
		scaled := 0
		for uid := range controllers {
			scaled += scale[uid]
		}
		expected = max(expected, scaled)
		keep, ok := desiredHealthy(pdb.Spec, expected)
		if !ok || expected-keep < 1 {
			continue
		}
		if ready-1 < keep {
			return fmt.Sprintf("the operator deleted pod %s, ready, while %d of the %d pods PodDisruptionBudget %s covers were ready: it keeps %d",
				name, ready, expected, pdb.Name, keep)
		}
	}
	return ""
}

func healthy(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && framework.PodReady(p) }

// desiredHealthy is how many of expected pods a budget keeps healthy,
// rounded up as the disruption controller rounds percentages.
func desiredHealthy(spec policyv1.PodDisruptionBudgetSpec, expected int) (int, bool) {
	switch {
	case spec.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, expected, true)
		return n, err == nil
	case spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, expected, true)
		return expected - n, err == nil
	}
	return 0, false
}

// Check is the oracle's check: the first budget a deletion broke, or how
// many deletions it judged.
func (g *Guard) Check() report.Check {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := report.Check{Kind: "disruption", Name: "the operator's pod deletions keep the PodDisruptionBudgets",
		Value: fmt.Sprintf("kept at %d deletions", g.judged), Budget: "no healthy pod below a budget"}
	if g.violation != "" {
		c.Value, c.Violation = "broken", g.violation
	}
	return c
}
