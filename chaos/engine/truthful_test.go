package engine

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func conds(pairs ...string) []metav1.Condition {
	var out []metav1.Condition
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, metav1.Condition{Type: pairs[i], Status: metav1.ConditionStatus(pairs[i+1]), Reason: "R"})
	}
	return out
}

// The status is judged against the workloads only where it claims
// something for the generation it has: done while a workload is not, or
// unavailable while every one is ready and updated.
func TestUntruthful(t *testing.T) {
	g := NewWithT(t)
	ready := workloadState{name: "StatefulSet/db", replicas: 3, ready: 3, updated: 3, generation: 2, observedGeneration: 2}
	lagging := workloadState{name: "StatefulSet/db", replicas: 3, ready: 2, updated: 3, generation: 2, observedGeneration: 2}
	stale := workloadState{name: "StatefulSet/db", replicas: 3, ready: 3, updated: 3, generation: 3, observedGeneration: 2}

	g.Expect(untruthful(conds("Available", "True", "Progressing", "False"), 4, 4, []workloadState{ready})).To(BeEmpty())
	g.Expect(untruthful(conds("Available", "True", "Progressing", "False", "Degraded", "False"), 4, 4, []workloadState{lagging})).To(
		Equal("Available=True and neither Progressing nor Degraded True, while StatefulSet/db: 2 of 3 ready, 3 updated"))
	g.Expect(untruthful(conds("Ready", "True"), 4, 4, []workloadState{stale})).To(
		Equal("Ready=True and neither Progressing nor Degraded True, while StatefulSet/db: 3 of 3 ready, 3 updated, generation 3 not yet observed (2)"))
	g.Expect(untruthful(conds("Available", "True", "Degraded", "True"), 4, 4, []workloadState{lagging})).To(BeEmpty(), "it says it is degraded")
	g.Expect(untruthful(conds("Available", "False"), 4, 4, []workloadState{ready})).To(Equal("Available=False (R), while every workload it controls is ready and updated"))
	g.Expect(untruthful(conds("Available", "False"), 4, 4, []workloadState{lagging})).To(BeEmpty())
	g.Expect(untruthful(conds("Available", "True"), 5, 4, []workloadState{lagging})).To(BeEmpty(), "the status speaks of an older generation")
	g.Expect(untruthful(conds("Progressing", "False"), 4, 4, []workloadState{lagging})).To(BeEmpty(), "no claim of availability")
	g.Expect(untruthful(conds("Available", "False"), 4, 4, nil)).To(BeEmpty(), "no workload to judge by")
}

func TestWorkloadOf(t *testing.T) {
	g := NewWithT(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"kind": "Deployment", "metadata": map[string]any{"name": "mc", "generation": int64(3)},
		"status": map[string]any{"readyReplicas": int64(1), "updatedReplicas": int64(1), "observedGeneration": int64(3)},
	}}
	w := workloadOf(u)
	g.Expect(w).To(Equal(workloadState{name: "Deployment/mc", replicas: 1, ready: 1, updated: 1, generation: 3, observedGeneration: 3}), "replicas default to 1")
	g.Expect(w.settled()).To(BeTrue())
}

func TestWorkloadResourcesAreWorkloads(t *testing.T) {
	for _, gvr := range workloadResources {
		if gvr.Group != "apps" {
			t.Errorf("%s is among the workloads whose readiness a status speaks of; want StatefulSets and Deployments only", gvr)
		}
	}
	if len(workloadResources) != 2 {
		t.Errorf("%d workload kinds, want StatefulSets and Deployments", len(workloadResources))
	}
}
