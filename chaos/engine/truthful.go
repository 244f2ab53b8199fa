package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// workloadResources are the children whose readiness a status speaks of:
// the first of compare.ChildResources, StatefulSets and Deployments.
var workloadResources = compare.ChildResources[:2]

// workloadState is what a workload child shows of its pods.
type workloadState struct {
	name                           string
	replicas, ready, updated       int64
	generation, observedGeneration int64
}

func (w workloadState) settled() bool {
	return w.observedGeneration >= w.generation && w.ready == w.replicas && w.updated == w.replicas
}

func (w workloadState) String() string {
	s := fmt.Sprintf("%s: %d of %d ready, %d updated", w.name, w.ready, w.replicas, w.updated)
	if w.observedGeneration < w.generation {
		s += fmt.Sprintf(", generation %d not yet observed (%d)", w.generation, w.observedGeneration)
	}
	return s
}

// workloadOf reads a StatefulSet or Deployment.
func workloadOf(u *unstructured.Unstructured) workloadState {
	n := func(path ...string) int64 {
		v, _, _ := unstructured.NestedInt64(u.Object, path...)
		return v
	}
	w := workloadState{name: u.GetKind() + "/" + u.GetName(), replicas: 1,
		ready: n("status", "readyReplicas"), updated: n("status", "updatedReplicas"),
		generation: u.GetGeneration(), observedGeneration: n("status", "observedGeneration")}
	if r, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found {
		w.replicas = r
	}
	return w
}

// untruthful says where the resource's conditions disagree with its
// workloads ("" where they agree or say nothing): it claims to be done
// (Available or Ready True, neither Progressing nor Degraded True, for
// the generation it has) while a workload is not ready or not updated;
// or it claims to be unavailable while it has workloads and every one
// is ready and updated.
func untruthful(conds []metav1.Condition, generation, observed int64, workloads []workloadState) string {
	var avail *metav1.Condition
	for _, t := range []string{"Available", "Ready"} {
		if c := apimeta.FindStatusCondition(conds, t); c != nil {
			avail = c
			break
		}
	}
	if avail == nil || len(workloads) == 0 || (observed > 0 && observed < generation) {
		return ""
	}
	busy := slices.ContainsFunc([]string{"Progressing", "Degraded"}, func(t string) bool {
		c := apimeta.FindStatusCondition(conds, t)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	var unsettled []string
	for _, w := range workloads {
		if !w.settled() {
			unsettled = append(unsettled, w.String())
		}
	}
	switch {
	case avail.Status == metav1.ConditionTrue && !busy && len(unsettled) > 0:
		return fmt.Sprintf("%s=True and neither Progressing nor Degraded True, while %s", avail.Type, strings.Join(unsettled, "; "))
	case avail.Status == metav1.ConditionFalse && len(unsettled) == 0:
		return fmt.Sprintf("%s=False (%s), while every workload it controls is ready and updated", avail.Type, avail.Reason)
	}
	return ""
}

// statusAt judges, once converged at moment, whether the resource's
// conditions agree with its workloads within followGrace (its status is
// written after its children change); the first disagreement is kept.
func (r *run) statusAt(ctx context.Context, moment string) {
	if !r.s.Spec.Assertions.TruthfulStatus {
		return
	}
	r.truthful.judged++
	var why string
	err := framework.PollFor(ctx, "the resource's conditions to agree with its workloads", followGrace, time.Second, func(ctx context.Context) (bool, string, error) {
		var err error
		if why, err = r.disagreement(ctx); err != nil {
			return false, err.Error(), nil
		}
		return why == "", why, nil
	})
	if err != nil && r.truthful.violation == "" {
		if why == "" {
			why = err.Error()
		}
		r.truthful.violation = fmt.Sprintf("after %s: %s", moment, why)
		r.e.logf("%s: the status is not truthful after %s: %s", r.s.Metadata.Name, moment, why)
	}
}

// disagreement reads the resource and the workloads it controls and says
// where its conditions disagree with them (untruthful), or "".
func (r *run) disagreement(ctx context.Context) (string, error) {
	u, err := r.resource().Get(ctx, r.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	listed, err := compare.List(ctx, r.e.Dynamic, r.ns, workloadResources...)
	if err != nil {
		return "", err
	}
	var workloads []workloadState
	listed.Each(func(_ schema.GroupVersionResource, _ string, o *unstructured.Unstructured) {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.UID == u.GetUID() {
			workloads = append(workloads, workloadOf(o))
		}
	})
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return untruthful(conditionsOf(u), u.GetGeneration(), observed, workloads), nil
}

// contradictions, on a resource that did not converge, judges whether its
// conditions contradict the workloads it controls (Available while a
// StatefulSet has had pods unready the whole wait, say). On every run,
// whatever its assertions, a contradiction is a finding of its own: a
// truthful-status check with its violation.
func (r *run) contradictions(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), followGrace)
	defer cancel()
	why, err := r.disagreement(ctx)
	if err != nil || why == "" {
		return
	}
	c := report.Check{Kind: "truthful-status", Name: "conditions agree with the workloads the resource controls",
		Value: "disagreed", Budget: "while it did not converge", Violation: "the resource did not converge and its conditions contradict its children: " + why}
	r.res.Checks = append(r.res.Checks, c)
	r.res.Violations = append(r.res.Violations, c.Violation)
	r.e.logf("%s: %s", r.s.Metadata.Name, c.Violation)
}

// truthfulCheck is the truthful-status oracle's check.
func (r *run) truthfulCheck() report.Check {
	c := report.Check{Kind: "truthful-status", Name: "conditions agree with the workloads the resource controls",
		Value: fmt.Sprintf("agreed at %d moments", r.truthful.judged), Budget: fmt.Sprintf("within %s of converging", followGrace)}
	if r.truthful.violation != "" {
		c.Value, c.Violation = "disagreed", r.truthful.violation
	}
	return c
}

// conditionsOf reads a resource's status conditions.
func conditionsOf(u *unstructured.Unstructured) []metav1.Condition {
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(status, &st)
	return st.Conditions
}

// reportConditions are u's conditions as a report records them.
func reportConditions(u *unstructured.Unstructured) []report.Condition {
	var out []report.Condition
	for _, c := range conditionsOf(u) {
		out = append(out, reportCondition(c))
	}
	return out
}

// reportCondition is a condition as a report records it.
func reportCondition(c metav1.Condition) report.Condition {
	return report.Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}
