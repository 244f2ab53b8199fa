package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
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
	refused  map[string]bool // namespace/pod refused by admission, said once
	withheld map[string]bool // namespace/pod not to be made again yet
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

// Withhold keeps the named pods from being made again when they are gone,
// as a controller that has not acted yet: a pod deleted meanwhile stays
// absent, and its set counts it missing, until Restore.
func (s *StatefulSetSimulator) Withhold(namespace string, pods ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.withheld == nil {
		s.withheld = map[string]bool{}
	}
	for _, p := range pods {
		s.withheld[namespace+"/"+p] = true
	}
}

// Restore lets the simulator make the named pods again.
func (s *StatefulSetSimulator) Restore(namespace string, pods ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pods {
		delete(s.withheld, namespace+"/"+p)
	}
}

func (s *StatefulSetSimulator) isWithheld(namespace, pod string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.withheld[namespace+"/"+pod]
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

	changed, err := s.scaleDown(ctx, sts, pods, replicas)
	if err != nil {
		return changed, err
	}
	rolled, err := s.rollOne(ctx, sts, pods, replicas, updateRev)
	changed = changed || rolled
	if err != nil {
		return changed, err
	}
	// Create missing pods, not ready.
	created := map[int]bool{}
	for ord := range replicas {
		if _, ok := pods[ord]; ok {
			continue
		}
		p := newPod(sts, ord, updateRev)
		if s.isWithheld(p.Namespace, p.Name) {
			continue
		}
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
		case apierrors.IsForbidden(err):
			// As the real controller, say so in an event on the set:
			// admission's refusal does not heal by retrying.
			s.failedCreate(ctx, sts, p.Name, err)
			return changed, fmt.Errorf("simulator: creating pod %s: %w", p.Name, err)
		case err != nil && !apierrors.IsAlreadyExists(err):
			return changed, fmt.Errorf("simulator: creating pod %s: %w", p.Name, err)
		}
		pods[ord] = p
		created[ord] = true
		changed = true
	}
	readied, err := s.kubelet(ctx, pods, created)
	changed = changed || readied
	if err != nil {
		return changed, err
	}
	c, err := s.writeStatus(ctx, sts, pods, updateRev)
	return changed || c, err
}

// scaleDown deletes the pods at or above the replica count (and their
// claims, when the retention policy says so), and drops them from pods.
func (s *StatefulSetSimulator) scaleDown(ctx context.Context, sts *appsv1.StatefulSet, pods map[int]*corev1.Pod, replicas int) (bool, error) {
	changed := false
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
	return changed, nil
}

// rollOne is a rolling update's step: it deletes the highest outdated
// ordinal while all others are ready (it comes back on the update revision)
// and drops it from pods. OnDelete rolls nothing.
func (s *StatefulSetSimulator) rollOne(ctx context.Context, sts *appsv1.StatefulSet, pods map[int]*corev1.Pod, replicas int, updateRev string) (bool, error) {
	if sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return false, nil
	}
	partition := 0
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	ord, ok := nextToRoll(pods, replicas, partition, updateRev)
	if !ok {
		return false, nil
	}
	if err := s.Client.Delete(ctx, pods[ord]); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("simulator: deleting pod %s for update: %w", pods[ord].Name, err)
	}
	delete(pods, ord)
	return true, nil
}

// kubelet moves each pod's readiness toward what the test wants, except
// the pods created in this step: those become ready on a later step, as a
// kubelet would make them. It updates pods with what it wrote.
func (s *StatefulSetSimulator) kubelet(ctx context.Context, pods map[int]*corev1.Pod, created map[int]bool) (bool, error) {
	changed := false
	for ord, p := range pods {
		if created[ord] {
			continue
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
	return changed, nil
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
