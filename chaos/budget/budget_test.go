package budget

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func budgetPod(name string, ready, deleting bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "db"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", UID: "sts", Controller: ptr.To(true)}}}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func budget(spec policyv1.PodDisruptionBudgetSpec) []policyv1.PodDisruptionBudget {
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	return []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: spec}}
}

func TestBudgetBroken(t *testing.T) {
	min2 := policyv1.PodDisruptionBudgetSpec{MinAvailable: &intstr.IntOrString{IntVal: 2}}
	maxOne := policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &intstr.IntOrString{IntVal: 1}}
	half := policyv1.PodDisruptionBudgetSpec{MinAvailable: &intstr.IntOrString{Type: intstr.String, StrVal: "50%"}}
	all := []corev1.Pod{budgetPod("db-0", true, false), budgetPod("db-1", true, false), budgetPod("db-2", true, false)}
	oneGoing := []corev1.Pod{budgetPod("db-0", true, false), budgetPod("db-1", true, false), budgetPod("db-2", true, true)}
	oneUnready := []corev1.Pod{budgetPod("db-0", true, false), budgetPod("db-1", true, false), budgetPod("db-2", false, false)}
	oneGone := []corev1.Pod{budgetPod("db-1", true, false), budgetPod("db-2", true, false)}
	for _, tc := range []struct {
		name   string
		delete string
		pods   []corev1.Pod
		pdbs   []policyv1.PodDisruptionBudget
		broken bool
	}{
		{"the first pod of a roll, all ready", "db-0", all, budget(min2), false},
		{"a second pod while the first is going (every member at once)", "db-1", oneGoing, budget(min2), true},
		{"a ready pod while another is unready", "db-0", oneUnready, budget(maxOne), true},
		{"the unready pod itself (replacing a failed member)", "db-2", oneUnready, budget(min2), false},
		{"a pod already going", "db-2", oneGoing, budget(min2), false},
		{"a percentage rounded up: 50% of 3 keeps 2", "db-0", oneGoing, budget(half), true},
		{"a second pod while the first is gone, not yet replaced", "db-1", oneGone, budget(min2), true},
		{"no budget", "db-1", oneGoing, nil, false},
		{"a pod the budget does not cover", "other", append([]corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "other"}}}, oneGoing...), budget(min2), false},
	} {
		why := budgetBroken(tc.delete, tc.pods, tc.pdbs, map[types.UID]int{"sts": 3})
		if (why != "") != tc.broken {
			t.Errorf("%s: budgetBroken = %q, want broken %v", tc.name, why, tc.broken)
		}
		if tc.broken && !strings.Contains(why, tc.delete) {
			t.Errorf("%s: %q does not name the pod", tc.name, why)
		}
	}
	// Two replicas that keep two: a budget that allows no disruption at
	// all, which every roll breaks, is not judged.
	if why := budgetBroken("db-0", all[:2], budget(min2), map[types.UID]int{"sts": 2}); why != "" {
		t.Errorf("a budget that allows no disruption: %q", why)
	}
}
