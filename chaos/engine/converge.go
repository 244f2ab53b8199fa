package engine

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podsNotMade names the first pod a StatefulSet of the namespace should
// have (ordinals below its replicas) that pods lacks, or "".
func (r *run) podsNotMade(ctx context.Context, pods *corev1.PodList) (string, error) {
	sets := &appsv1.StatefulSetList{}
	if err := r.e.Client.List(ctx, sets, client.InNamespace(r.ns)); err != nil {
		return "", err
	}
	for _, sts := range sets.Items {
		if !sts.DeletionTimestamp.IsZero() {
			continue
		}
		want := int32(1)
		if sts.Spec.Replicas != nil {
			want = *sts.Spec.Replicas
		}
		for ord := range want {
			name := fmt.Sprintf("%s-%d", sts.Name, ord)
			if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == name }) {
				return fmt.Sprintf("pod %s of StatefulSet %s not made yet", name, sts.Name), nil
			}
		}
	}
	return "", nil
}
