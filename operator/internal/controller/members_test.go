package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func TestDegradedRecheck(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	degradedFor := func(d time.Duration) []metav1.Condition {
		return []metav1.Condition{{Type: dbv1.ConditionDegraded, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-d))}}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  time.Duration
	}{
		{"not yet Degraded: the member just went", nil, DegradedFastRecheck},
		{"Degraded=False still recorded", []metav1.Condition{{Type: dbv1.ConditionDegraded, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}, DegradedFastRecheck},
		{"Degraded for 5s", degradedFor(5 * time.Second), DegradedFastRecheck},
		{"Degraded just under the window", degradedFor(DegradedFastWindow - time.Second), DegradedFastRecheck},
		{"Degraded for the whole window", degradedFor(DegradedFastWindow), DegradedRecheckInterval},
		{"Degraded for an hour", degradedFor(time.Hour), DegradedRecheckInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(degradedRecheck(tc.conds, now)).To(Equal(tc.want))
		})
	}
}
