package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatefulSetSimulator plays the StatefulSet controller and the kubelets for
// backends that run neither (the fake client, envtest): each Step creates
// and deletes pods to match spec.replicas, makes pods ready, rolls pods to a
// changed template, and writes StatefulSet status the way the real
// controller does. It writes only what changed, so a settled world makes no
// writes.
//
// Timing follows the real thing in order, not in time: a pod is created not
// ready and becomes ready on a later Step; a rolling update replaces one pod
// per Step, highest ordinal first, and only while every other pod is ready.
type StatefulSetSimulator struct {
	// Client reads and writes StatefulSets and Pods.
	Client client.Client
	// Namespace limits the simulator to one namespace; empty means all.
	Namespace string
	// Probe, when set, is the pods' readiness probe: a pod becomes ready
	// only when it passes (and SetReady has not made it unready). A
	// database's world uses it to keep a pod whose process cannot start
	// (not a member, data lost) from ever becoming ready.
	Probe func(*corev1.Pod) bool
	// CachedReads says that Client reads from an informer cache holding
	// PodControllerIndex. The simulator then lists a
	// StatefulSet's pods by that index and reads without deep copies,
	// copying only what it writes. Without it, a cache answers a label
	// selector by scanning every pod of the namespace and copies every
	// object it returns: at a thousand StatefulSets, stepped five times a
	// second, the harness then costs more CPU than the operator under test.
	CachedReads bool

	mu       sync.Mutex
	notReady map[string]bool // namespace/pod
	revs     map[types.UID]revision
	paused   map[string]bool // namespaces
	created  int             // pods created, for their UIDs
}

// Pause stops the simulator from acting in a namespace, for tests that write
// StatefulSet status themselves; Resume undoes it.
func (s *StatefulSetSimulator) Pause(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		s.paused = map[string]bool{}
	}
	s.paused[namespace] = true
}

// Resume lets the simulator act in a namespace again.
func (s *StatefulSetSimulator) Resume(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.paused, namespace)
}

func (s *StatefulSetSimulator) isPaused(namespace string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused[namespace]
}

// SetReady makes the named pods (namespace/name) become ready on the next
// Step (ready=true, the default for every pod) or unready (ready=false).
func (s *StatefulSetSimulator) SetReady(ready bool, namespace string, pods ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notReady == nil {
		s.notReady = map[string]bool{}
	}
	for _, p := range pods {
		if ready {
			delete(s.notReady, namespace+"/"+p)
		} else {
			s.notReady[namespace+"/"+p] = true
		}
	}
}

func (s *StatefulSetSimulator) wantReady(p *corev1.Pod) bool {
	s.mu.Lock()
	unready := s.notReady[p.Namespace+"/"+p.Name]
	s.mu.Unlock()
	return !unready && (s.Probe == nil || s.Probe(p))
}

// Step advances every StatefulSet by one step and reports whether it wrote
// anything.
func (s *StatefulSetSimulator) Step(ctx context.Context) (changed bool, err error) {
	sets := &appsv1.StatefulSetList{}
	var opts []client.ListOption
	if s.Namespace != "" {
		opts = append(opts, client.InNamespace(s.Namespace))
	}
	if s.CachedReads {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	if err := s.Client.List(ctx, sets, opts...); err != nil {
		return false, fmt.Errorf("simulator: listing StatefulSets: %w", err)
	}
	s.forgetRevisions(sets.Items)
	// One StatefulSet's trouble must not starve the others.
	var errs []error
	for i := range sets.Items {
		c, err := s.stepOne(ctx, &sets.Items[i])
		if err != nil {
			errs = append(errs, err)
		}
		changed = changed || c
	}
	return changed, errors.Join(errs...)
}

// Settle runs Step until it writes nothing, at most maxSteps times.
func (s *StatefulSetSimulator) Settle(ctx context.Context, maxSteps int) error {
	for range maxSteps {
		changed, err := s.Step(ctx)
		if err != nil || !changed {
			return err
		}
	}
	return fmt.Errorf("simulator: StatefulSets still changing after %d steps", maxSteps)
}

// Revision is the revision name the simulator gives a StatefulSet's current
// template, like the controller's ControllerRevision names.
func Revision(sts *appsv1.StatefulSet) string {
	data, _ := json.Marshal(sts.Spec.Template) //nolint:errchkjson // a PodTemplateSpec always marshals
	h := fnv.New32a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%s-%08x", sts.Name, h.Sum32())
}

// revision is a memo of one StatefulSet's Revision.
type revision struct {
	resourceVersion string
	value           string
}

// revision is Revision(sts), computed again only when the StatefulSet
// changed: hashing the pod template of every StatefulSet on every step is
// the simulator's own cost, not the system's.
func (s *StatefulSetSimulator) revision(sts *appsv1.StatefulSet) string {
	if sts.UID == "" || sts.ResourceVersion == "" {
		return Revision(sts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.revs[sts.UID]; ok && r.resourceVersion == sts.ResourceVersion {
		return r.value
	}
	if s.revs == nil {
		s.revs = map[types.UID]revision{}
	}
	v := Revision(sts)
	s.revs[sts.UID] = revision{resourceVersion: sts.ResourceVersion, value: v}
	return v
}

// forgetRevisions drops the memos of StatefulSets that are gone.
func (s *StatefulSetSimulator) forgetRevisions(sets []appsv1.StatefulSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.revs) <= len(sets) {
		return
	}
	live := make(map[types.UID]bool, len(sets))
	for i := range sets {
		live[sets[i].UID] = true
	}
	for uid := range s.revs {
		if !live[uid] {
			delete(s.revs, uid)
		}
	}
}

func (s *StatefulSetSimulator) stepOne(ctx context.Context, sts *appsv1.StatefulSet) (bool, error) {
	if !sts.DeletionTimestamp.IsZero() || s.isPaused(sts.Namespace) {
		return false, nil
	}
	pods, err := s.podsOf(ctx, sts)
	if err != nil {
		return false, err
	}
	replicas := int(ptr.Deref(sts.Spec.Replicas, 1))
	updateRev := s.revision(sts)
	changed := false

	// Scale down: delete pods at or above the replica count (and their
	// claims, when the retention policy says so).
	for ord, p := range pods {
		if ord >= replicas {
			if err := s.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return changed, fmt.Errorf("simulator: deleting pod %s: %w", p.Name, err)
			}
			delete(pods, ord)
			changed = true
			if policy := sts.Spec.PersistentVolumeClaimRetentionPolicy; policy != nil && policy.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				for _, t := range sts.Spec.VolumeClaimTemplates {
					claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: ClaimName(t.Name, p.Name)}}
					if err := s.Client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
						return changed, fmt.Errorf("simulator: deleting claim %s: %w", claim.Name, err)
					}
				}
			}
		}
	}
	// Rolling update: replace the highest outdated ordinal while all others are ready.
	if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		partition := 0
		if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			partition = int(*ru.Partition)
		}
		if ord, ok := nextToRoll(pods, replicas, partition, updateRev); ok {
			if err := s.Client.Delete(ctx, pods[ord]); client.IgnoreNotFound(err) != nil {
				return changed, fmt.Errorf("simulator: deleting pod %s for update: %w", pods[ord].Name, err)
			}
			delete(pods, ord)
			changed = true
		}
	}
	// Create missing pods, not ready.
	created := map[int]bool{}
	for ord := range replicas {
		if _, ok := pods[ord]; ok {
			continue
		}
		p := newPod(sts, ord, updateRev)
		if err := s.ensureClaims(ctx, sts, p.Name); err != nil {
			return changed, err
		}
		// The fake API assigns no UIDs; a server would, and a recreated pod
		// must not pass for the one it replaces.
		s.mu.Lock()
		s.created++
		p.UID = types.UID(fmt.Sprintf("%s-%s-%d", p.Namespace, p.Name, s.created))
		s.mu.Unlock()
		switch err := s.Client.Create(ctx, p); {
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			return changed, nil // as the real controller: nothing to do in a dying namespace
		case err != nil && !apierrors.IsAlreadyExists(err):
			return changed, fmt.Errorf("simulator: creating pod %s: %w", p.Name, err)
		}
		pods[ord] = p
		created[ord] = true
		changed = true
	}
	// Kubelet: move readiness toward what the test wants, except pods created in this step.
	for ord, p := range pods {
		if created[ord] {
			continue // ready on a later step, as a kubelet would make it
		}
		updated, err := s.setPodReady(ctx, p, s.wantReady(p))
		if err != nil {
			return changed, err
		}
		if updated != nil {
			pods[ord] = updated
			changed = true
		}
	}
	c, err := s.writeStatus(ctx, sts, pods, updateRev)
	return changed || c, err
}

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
			claim.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}
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
	return pods, nil
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
			Annotations: sts.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
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

func (s *StatefulSetSimulator) writeStatus(ctx context.Context, sts *appsv1.StatefulSet, pods map[int]*corev1.Pod, updateRev string) (bool, error) {
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: sts.Generation,
		UpdateRevision:     updateRev,
		CurrentRevision:    sts.Status.CurrentRevision,
		CollisionCount:     sts.Status.CollisionCount,
	}
	ords := make([]int, 0, len(pods))
	for ord := range pods {
		ords = append(ords, ord)
	}
	sort.Ints(ords)
	for _, ord := range ords {
		p := pods[ord]
		st.Replicas++
		if PodReady(p) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == updateRev {
			st.UpdatedReplicas++
		}
	}
	// As the real controller: only a RollingUpdate completes (moves
	// currentRevision); with OnDelete it stays where the first pods began.
	if st.CurrentRevision == "" || (st.UpdatedReplicas == st.Replicas && sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType) {
		st.CurrentRevision = updateRev
	}
	for _, p := range pods {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == st.CurrentRevision {
			st.CurrentReplicas++
		}
	}
	if equality.Semantic.DeepEqual(sts.Status, st) {
		return false, nil
	}
	sts = sts.DeepCopy() // sts may be the cache's own object
	sts.Status = st
	if err := s.Client.Status().Update(ctx, sts); err != nil {
		return false, fmt.Errorf("simulator: updating status of StatefulSet %s: %w", sts.Name, err)
	}
	return true, nil
}
