package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
)

func TestPodsByClusterIndexesMemberPodsOnly(t *testing.T) {
	c := &dbv1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labels}}
	}
	cases := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{"a member pod, by its StatefulSet's selector", builders.SelectorLabels(c), []string{"db"}},
		{"a member pod with every child label", builders.Labels(c), []string{"db"}},
		{"another app's pod of the same instance name", map[string]string{builders.LabelName: "postgres", builders.LabelInstance: "db"}, nil},
		{"no instance", map[string]string{builders.LabelName: builders.SelectorLabelName}, nil},
		{"no labels", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ix := FieldIndexes()
			g.Expect(ix).To(HaveLen(1))
			g.Expect(ix[0].Field).To(Equal(PodsByCluster))
			g.Expect(ix[0].Object).To(BeAssignableToTypeOf(&corev1.Pod{}))
			g.Expect(ix[0].Extract(pod(tc.labels))).To(Equal(tc.want))
		})
	}
}
