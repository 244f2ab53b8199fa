package reference

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// EtcdWorld plays the etcd processes in the member pods of the fake API, by
// etcd's own rules: a pod's process starts only if it is a member (by name)
// or a learner registered with its peer URL, or, while the members
// ConfigMap says "new", one of the initial members (the first to start
// forms the cluster). A process that cannot start never passes its
// readiness probe, so an operator that grows the StatefulSet without
// registering the member first gets a pod that is never ready. A member is
// healthy while its pod runs, is ready and has not been failed by the test.
type EtcdWorld struct {
	// Client reads pods, ConfigMaps and DatabaseClusters.
	Client client.Client
	// Etcd is the member API the reconciler talks to.
	Etcd *operator.FakeEtcd
	// Namespace holds the clusters.
	Namespace string

	mu      sync.Mutex
	running map[types.UID]bool // pods whose etcd process started
	failed  map[string]bool    // member names that stop answering
	last    string             // etcd's view after the previous step
	started map[uint64]bool    // members whose process has run once
}

// Probe is the member pods' readiness probe (framework.StatefulSetSimulator.Probe):
// it passes once the pod's etcd process runs. (A failed member's probe is
// the test's to fail too, with the simulator's SetReady: some failures show
// in etcd's health before they show in readiness.)
func (e *EtcdWorld) Probe(p *corev1.Pod) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[p.UID]
}

// Fail makes the named member stop answering etcd's health checks (true) or
// recover (false).
func (e *EtcdWorld) Fail(name string, failed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed == nil {
		e.failed = map[string]bool{}
	}
	if failed {
		e.failed[name] = true
	} else {
		delete(e.failed, name)
	}
}

// HealAll recovers every failed member.
func (e *EtcdWorld) HealAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failed = nil
}

// Step starts the processes of pods that can start, then sets each member's
// health and lets raft elect a leader. It reports whether etcd's view changed
// since the previous step, by this step or by the operator's calls.
func (e *EtcdWorld) Step(ctx context.Context) (bool, error) {
	clusters := &dbv1.DatabaseClusterList{}
	if err := e.Client.List(ctx, clusters, client.InNamespace(e.Namespace)); err != nil {
		return false, fmt.Errorf("listing DatabaseClusters: %w", err)
	}
	for i := range clusters.Items {
		if err := e.stepCluster(ctx, &clusters.Items[i]); err != nil {
			return false, err
		}
	}
	e.Etcd.Elect()
	now := e.view()
	e.mu.Lock()
	defer e.mu.Unlock()
	changed := now != e.last
	e.last = now
	return changed, nil
}

// view renders everything the operator could observe of etcd.
func (e *EtcdWorld) view() string {
	var b strings.Builder
	for _, m := range e.Etcd.Members() {
		fmt.Fprintf(&b, "%x/%s/%v/%v/%v/%v ", m.ID, m.Name, m.PeerURLs, m.IsLearner, m.Healthy, m.Leader)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(&b, "running=%d", len(e.running))
	return b.String()
}

func (e *EtcdWorld) stepCluster(ctx context.Context, c *dbv1.DatabaseCluster) error {
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(operator.SelectorLabels(c))); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	state, initial, err := e.membersConfig(ctx, c)
	if err != nil {
		return err
	}
	peerURL := func(name string) string { return operator.PeerURL(c, name, operator.BuilderOptions{}) }
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running == nil {
		e.running = map[types.UID]bool{}
	}
	live := map[types.UID]bool{}
	healthy := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		live[p.UID] = true
		if !e.running[p.UID] {
			if state == operator.ClusterStateNew && slices.Contains(initial, p.Name) {
				urls := make([]string, len(initial))
				for i, n := range initial {
					urls[i] = peerURL(n)
				}
				e.Etcd.Bootstrap(initial, urls)
			}
			if err := e.start(ctx, c, p, peerURL(p.Name)); err != nil {
				return err
			}
		}
		healthy[p.Name] = e.running[p.UID] && !e.failed[p.Name] && framework.PodReady(p)
	}
	for uid := range e.running {
		if !live[uid] {
			delete(e.running, uid) // the pod is gone, and its process with it
		}
	}
	// A member removed from the cluster shuts its process down.
	for _, p := range pods.Items {
		if e.running[p.UID] && !slices.ContainsFunc(e.Etcd.Members(), func(m operator.EtcdMember) bool { return m.Name == p.Name }) {
			delete(e.running, p.UID)
			healthy[p.Name] = false
		}
	}
	for _, m := range e.Etcd.Members() {
		if m.Name != "" {
			e.Etcd.SetHealthy(m.Name, healthy[m.Name])
		}
	}
	return nil
}

// DataAnnotation marks a member volume (in this world) with the ID of the
// member whose data it holds, as etcd's data directory would; lostPrefix
// marks a WAL with that ID but no raft log (written before a panic).
const (
	DataAnnotation = "gauntlet.dev/etcd-member-data"
	lostPrefix     = "lost:"
)

// Last words of an etcd process, as etcd prints them.
const (
	// LostDataMessage: a started member restarted on an empty volume.
	LostDataMessage = "panic: tocommit(9) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?"
	// RemovedMessage: a member's data belongs to a member no longer in the cluster.
	RemovedMessage = "etcdserver: the member has been permanently removed from the cluster"
)

// start runs a pod's etcd process by etcd's rules, reading and writing the
// data marker on its volume; a process that cannot start leaves its last
// words in the pod's status, as the kubelet does with
// FallbackToLogsOnError. Called with e.mu held.
func (e *EtcdWorld) start(ctx context.Context, c *dbv1.DatabaseCluster, p *corev1.Pod, peerURL string) error {
	claim := &corev1.PersistentVolumeClaim{}
	switch err := e.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: framework.ClaimName(operator.DataVolumeName, p.Name)}, claim); {
	case apierrors.IsNotFound(err):
		return nil // no volume: the pod cannot start its container
	case err != nil:
		return err
	}
	data := claim.Annotations[DataAnnotation]
	var named *operator.EtcdMember
	for _, m := range e.Etcd.Members() {
		if m.Name == p.Name {
			named = &m
		}
	}
	switch {
	case named != nil && (data == lostPrefix+named.IDString() || (data == "" && e.started[named.ID])):
		// A started member on an empty volume: etcd writes a WAL under
		// the member's ID, then raft panics; every restart panics again.
		if data == "" {
			if claim.Annotations == nil {
				claim.Annotations = map[string]string{}
			}
			claim.Annotations[DataAnnotation] = lostPrefix + named.IDString()
			if err := e.Client.Update(ctx, claim); err != nil {
				return err
			}
		}
		return e.crash(ctx, p, LostDataMessage)
	case data != "" && (named == nil || named.IDString() != data):
		return e.crash(ctx, p, RemovedMessage)
	}
	m, ok := e.Etcd.Start(p.Name, peerURL)
	if !ok {
		return nil // not a member: etcd exits at once
	}
	if e.started == nil {
		e.started = map[uint64]bool{}
	}
	e.started[m.ID] = true
	e.running[p.UID] = true
	if data == "" {
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[DataAnnotation] = m.IDString()
		if err := e.Client.Update(ctx, claim); err != nil {
			return err
		}
	}
	return nil
}

func (e *EtcdWorld) crash(ctx context.Context, p *corev1.Pod, message string) error {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.LastTerminationState.Terminated; t != nil && t.Message == message {
			return nil // already crash-looping with these words
		}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:                 operator.ContainerName,
		RestartCount:         1,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: message}},
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
	}}
	return e.Client.Status().Update(ctx, p)
}

func (e *EtcdWorld) membersConfig(ctx context.Context, c *dbv1.DatabaseCluster) (string, []string, error) {
	cm := &corev1.ConfigMap{}
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operator.MembersConfigMapName(c)}, cm)
	if apierrors.IsNotFound(err) {
		return "", nil, nil // a pod without its ConfigMap cannot start its container
	}
	if err != nil {
		return "", nil, err
	}
	return cm.Data[operator.EnvInitialClusterState], operator.InitialClusterMembers(cm.Data[operator.EnvInitialCluster]), nil
}
