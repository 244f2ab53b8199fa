package controller

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
)

// observeMembers reads membership and health from etcd's own API through the
// ready members, and merges it with pod readiness. An unreachable member API
// is an observation (the Degraded condition says so), not a failed pass.
func (r *Reconciler) observeMembers(ctx context.Context, s *scope) (ctrl.Result, error) {
	ready := podReadiness(s.pods)
	var endpoints []string
	for _, p := range s.pods {
		if ready[p.Name] {
			endpoints = append(endpoints, memberEndpoint(s.cluster, &p, r.Builders))
		}
	}
	var list []etcd.Member
	if r.Dialer != nil && len(endpoints) > 0 {
		var err error
		if list, err = r.listMembers(ctx, s, endpoints); err != nil {
			s.memberAPIErr = err
		} else {
			s.membersFromAPI = true
			s.apiMembers = list
		}
	}
	s.members = mergeMembers(s.cluster, ready, list, s.membersFromAPI, r.Builders)
	s.membersObserved = true

	switch {
	case r.Dialer == nil && s.statefulSet != nil && s.statefulSet.Status.ReadyReplicas > int32(countTrue(ready)):
		// Health comes from pod readiness, which the StatefulSet watch
		// reports; but the pod cache can lag behind the StatefulSet's (seen
		// at 1000 clusters on envtest): the StatefulSet says more pods are
		// ready than the cache shows, and no later event would come.
		return ctrl.Result{RequeueAfter: PodCacheLagRecheck}, nil
	case r.Dialer == nil:
		return ctrl.Result{}, nil
	case healthyCount(s.members) < len(s.members):
		return ctrl.Result{RequeueAfter: degradedRecheck(s.cluster.Status.Conditions, r.now())}, nil
	default:
		return ctrl.Result{RequeueAfter: HealthCheckInterval}, nil
	}
}

// memberEndpoint is the client URL the operator dials for a member pod: its
// current IP when the pod has one, not its DNS name, which the cluster's
// DNS may still resolve to the address the pod had before its node
// restarted (for the record's TTL, seconds in which a healthy member would
// read as unreachable).
func memberEndpoint(c *dbv1.DatabaseCluster, p *corev1.Pod, o builders.Options) string {
	if p.Status.PodIP == "" {
		return builders.ClientURL(c, p.Name, o)
	}
	return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(builders.ClientPort)))
}

// listMembers dials etcd and keeps the client in the scope for the pass's
// membership step, if any; Reconcile closes it.
func (r *Reconciler) listMembers(ctx context.Context, s *scope, endpoints []string) ([]etcd.Member, error) {
	cl, err := r.Dialer.Dial(ctx, endpoints)
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd: %w", err)
	}
	s.etcd = cl
	list, err := cl.ListMembers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing etcd members: %w", err)
	}
	return list, nil
}

// podReadiness maps each member pod's name to whether it is ready and not
// being deleted.
func podReadiness(pods []corev1.Pod) map[string]bool {
	ready := make(map[string]bool, len(pods))
	for _, p := range pods {
		ready[p.Name] = p.DeletionTimestamp.IsZero() && isPodReady(&p)
	}
	return ready
}

// podTrouble says why a member's pod cannot run, when its containers say
// so and the spec can fix it: an image that cannot be pulled names
// spec.image, a container that keeps crashing says so. It is "" for a pod
// that is merely starting, or not there.
func podTrouble(pods []corev1.Pod, name string) string {
	for _, p := range pods {
		if p.Name != name {
			continue
		}
		for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return fmt.Sprintf("its container %s cannot pull image %q (%s); check spec.image", cs.Name, cs.Image, w.Reason)
			case "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError":
				return fmt.Sprintf("its container %s is in %s", cs.Name, w.Reason)
			}
		}
	}
	return ""
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// mergeMembers lists one entry per expected member (ordinals 0..replicas-1)
// and one per extra etcd member that has no expected pod. With the member
// API, a member is healthy when its pod is ready and etcd reports it
// healthy; without it, pod readiness is all there is.
func mergeMembers(c *dbv1.DatabaseCluster, podReady map[string]bool, list []etcd.Member, fromAPI bool, o builders.Options) []dbv1.MemberStatus {
	byName := make(map[string]etcd.Member, len(list))
	byPeerURL := make(map[string]etcd.Member, len(list))
	for _, m := range list {
		if m.Name != "" {
			byName[m.Name] = m
		}
		for _, u := range m.PeerURLs {
			byPeerURL[u] = m
		}
	}
	matched := make(map[uint64]bool, len(list))
	desired := int(c.DesiredReplicas())
	out := make([]dbv1.MemberStatus, 0, max(desired, len(list)))
	for i := range desired {
		name := builders.MemberName(c, i)
		ms := dbv1.MemberStatus{Name: name, Healthy: podReady[name]}
		if fromAPI {
			m, ok := byName[name]
			if !ok {
				m, ok = byPeerURL[builders.PeerURL(c, name, o)]
			}
			if ok {
				matched[m.ID] = true
				ms.ID, ms.Leader, ms.Learner = m.IDString(), m.Leader, m.IsLearner
				ms.Healthy = ms.Healthy && m.Healthy
			} else {
				ms.Healthy = false
			}
		}
		out = append(out, ms)
	}
	var extra []dbv1.MemberStatus
	for _, m := range list {
		if matched[m.ID] {
			continue
		}
		name := m.Name
		if name == "" {
			name = "unstarted-" + m.IDString()
		}
		extra = append(extra, dbv1.MemberStatus{
			Name: name, ID: m.IDString(), Healthy: m.Healthy, Leader: m.Leader, Learner: m.IsLearner,
		})
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].Name < extra[j].Name })
	return append(out, extra...)
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

func healthyCount(members []dbv1.MemberStatus) int {
	n := 0
	for _, m := range members {
		if m.Healthy {
			n++
		}
	}
	return n
}

// degradedRecheck is when to read member health again while a member is
// unhealthy: every second for the first DegradedFastWindow after the
// cluster turned Degraded (or before it has), then every
// DegradedRecheckInterval, so a member down for good costs little.
func degradedRecheck(conds []metav1.Condition, now time.Time) time.Duration {
	c := meta.FindStatusCondition(conds, dbv1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || now.Sub(c.LastTransitionTime.Time) < DegradedFastWindow {
		return DegradedFastRecheck
	}
	return DegradedRecheckInterval
}
