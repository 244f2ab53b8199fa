package framework

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensureClaims creates the pod's missing claims from the claim templates,
// as the StatefulSet controller does before it creates the pod; with the
// WhenDeleted=Delete retention policy the StatefulSet owns them.
func (s *StatefulSetSimulator) ensureClaims(ctx context.Context, sts *appsv1.StatefulSet, pod string) error {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: ClaimName(t.Name, pod), Labels: t.Labels},
			Spec:       *t.Spec.DeepCopy(),
		}
		if policy := sts.Spec.PersistentVolumeClaimRetentionPolicy; policy != nil && policy.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			claim.OwnerReferences = []metav1.OwnerReference{setRef(sts)}
		}
		s.mu.Lock()
		s.created++
		claim.UID = types.UID(fmt.Sprintf("%s-%s-%d", claim.Namespace, claim.Name, s.created))
		s.mu.Unlock()
		switch err := s.Client.Create(ctx, claim); {
		case apierrors.IsAlreadyExists(err):
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		case err != nil:
			return fmt.Errorf("simulator: creating claim %s: %w", claim.Name, err)
		}
	}
	return nil
}

// nextToRoll picks the highest ordinal at or above partition whose revision is
// outdated, provided every other pod is ready.
func nextToRoll(pods map[int]*corev1.Pod, replicas, partition int, updateRev string) (int, bool) {
	for ord := range replicas {
		if p, ok := pods[ord]; !ok || !PodReady(p) {
			return 0, false
		}
	}
	for ord := replicas - 1; ord >= partition; ord-- {
		if pods[ord].Labels[appsv1.ControllerRevisionHashLabelKey] != updateRev {
			return ord, true
		}
	}
	return 0, false
}

func (s *StatefulSetSimulator) podsOf(ctx context.Context, sts *appsv1.StatefulSet) (map[int]*corev1.Pod, error) {
	list := &corev1.PodList{}
	opts := []client.ListOption{client.InNamespace(sts.Namespace)}
	if s.CachedReads {
		opts = append(opts, client.MatchingFields{PodControllerIndex.Field: string(sts.UID)}, client.UnsafeDisableDeepCopy)
	} else {
		opts = append(opts, client.MatchingLabels(sts.Spec.Selector.MatchLabels))
	}
	if err := s.Client.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("simulator: listing pods of %s: %w", sts.Name, err)
	}
	pods := map[int]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if !metav1.IsControlledBy(p, sts) {
			continue
		}
		if ord, ok := ordinal(sts.Name, p.Name); ok {
			pods[ord] = p
		}
	}
	if len(pods) >= int(ptr.Deref(sts.Spec.Replicas, 1)) {
		return pods, nil // no member missing: nothing to adopt, no second list
	}
	return pods, s.adopt(ctx, sts, pods)
}

// adopt makes sts, which lacks members, the controller of the pods its
// selector matches that have none, named as its members (a set deleted with propagation Orphan
// and made again leaves them), as the StatefulSet controller claims
// orphans, and adds them to pods.
func (s *StatefulSetSimulator) adopt(ctx context.Context, sts *appsv1.StatefulSet, pods map[int]*corev1.Pod) error {
	list := &corev1.PodList{}
	if err := s.Client.List(ctx, list, client.InNamespace(sts.Namespace), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
		return fmt.Errorf("simulator: listing pods of %s to adopt: %w", sts.Name, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		ord, ok := ordinal(sts.Name, p.Name)
		if !ok || metav1.GetControllerOf(p) != nil || !p.DeletionTimestamp.IsZero() {
			continue
		}
		base := p.DeepCopy()
		p.OwnerReferences = append(p.OwnerReferences, setRef(sts))
		if err := s.Client.Patch(ctx, p, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("simulator: adopting pod %s: %w", p.Name, err)
		}
		pods[ord] = p
	}
	return nil
}

// PodControllerIndex indexes pods by the UID of their controller (their
// StatefulSet, ReplicaSet, Job...): what StatefulSetSimulator.CachedReads
// lists by. Register it with the cache the simulator reads from (IndexField)
// or with a fake client (FakeClientOptions.Indexes).
var PodControllerIndex = FieldIndex{
	Object: &corev1.Pod{},
	Field:  "gauntlet.dev/pod-controller-uid",
	Extract: func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	},
}

func ordinal(set, pod string) (int, bool) {
	if len(pod) <= len(set)+1 || pod[:len(set)+1] != set+"-" {
		return 0, false
	}
	n, err := strconv.Atoi(pod[len(set)+1:])
	return n, err == nil
}

// setRef is the reference by which sts controls its pods (and, with the
// WhenDeleted=Delete retention policy, its claims).
func setRef(sts *appsv1.StatefulSet) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

func newPod(sts *appsv1.StatefulSet, ord int, rev string) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", sts.Name, ord)
	labels := map[string]string{}
	for k, v := range sts.Spec.Template.Labels {
		labels[k] = v
	}
	labels[appsv1.ControllerRevisionHashLabelKey] = rev
	labels[appsv1.StatefulSetPodNameLabel] = name
	spec := *sts.Spec.Template.Spec.DeepCopy()
	spec.Hostname, spec.Subdomain = name, sts.Spec.ServiceName
	// Each claim template becomes a volume backed by the pod's own claim.
	for _, t := range sts.Spec.VolumeClaimTemplates {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name: t.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: ClaimName(t.Name, name),
			}},
		})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: sts.Namespace, Labels: labels,
			Annotations:     sts.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{setRef(sts)},
		},
		Spec: spec,
	}
}

// ClaimName is the name the StatefulSet controller gives the claim of a
// template for one pod.
func ClaimName(template, pod string) string { return template + "-" + pod }

// PodReady tells whether a pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setPodReady makes a pod Running with its readiness set to ready and
// returns the pod as written, or nil when it already was. It never modifies p, which may be
// the cache's own object.
func (s *StatefulSetSimulator) setPodReady(ctx context.Context, p *corev1.Pod, ready bool) (*corev1.Pod, error) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	if p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == status && podCondition(p, corev1.ContainersReady) == status {
		return nil, nil
	}
	want := p.DeepCopy()
	want.Status.Phase = corev1.PodRunning
	setPodCondition(want, corev1.PodReady, status)
	setPodCondition(want, corev1.ContainersReady, status)
	if err := s.Client.Status().Update(ctx, want); err != nil {
		return nil, fmt.Errorf("simulator: updating status of pod %s: %w", p.Name, err)
	}
	return want, nil
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func setPodCondition(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			p.Status.Conditions[i].Status = s
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s})
}

// failedCreate records, as the StatefulSet controller does, a Warning
// event FailedCreate on the set for a pod the API server refused. Failing
// to record it is not an error of the simulation.
func (s *StatefulSetSimulator) failedCreate(ctx context.Context, sts *appsv1.StatefulSet, pod string, cause error) {
	s.mu.Lock()
	key := sts.Namespace + "/" + pod
	said := s.refused[key]
	if s.refused == nil {
		s.refused = map[string]bool{}
	}
	s.refused[key] = true
	s.mu.Unlock()
	if said {
		return
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: sts.Name + ".", Namespace: sts.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet",
			Namespace: sts.Namespace, Name: sts.Name, UID: sts.UID},
		Reason:         "FailedCreate",
		Message:        fmt.Sprintf("create Pod %s in StatefulSet %s failed error: %v", pod, sts.Name, cause),
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "statefulset-controller"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	_ = s.Client.Create(ctx, ev)
}
