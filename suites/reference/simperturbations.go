package reference

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/sim"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// perturbations are what the world does to the cluster. Without membership
// changes (no member API, where the operator cannot change the membership,
// or a cluster of 1 or 2, which is not scaled) no scale arrives and no
// volume is lost (its member could not be replaced).
func (sw *simWorld) perturbations(membershipChanges bool) []sim.Perturbation {
	all := []sim.Perturbation{
		{Name: "scale", Apply: sw.scale},
		{Name: "image", Apply: sw.changeImage},
		{Name: "pod-unready", Apply: sw.podUnready},
		{Name: "member-fails", Apply: sw.memberFails},
		{Name: "pod-deleted", Apply: sw.deletePod},
		{Name: "volume-lost", Apply: sw.loseVolume},
		sw.midChangePerturbation(),
		{Name: "delete-cluster", Apply: sw.deleteCluster},
	}
	if !membershipChanges {
		all = slices.DeleteFunc(all, func(p sim.Perturbation) bool { return p.Name == "scale" || p.Name == "volume-lost" })
	}
	return all
}

// scale resizes the cluster to 3 or 5 members, both ways. Smaller clusters
// tolerate no member down, so the operator pauses an upgrade there and the
// end state depends on whether the roll finished before the scale-down:
// the differential oracle would flag the timing, not a bug. The unit tier
// replays 3→5→3→1→3 step by step instead.
func (sw *simWorld) scale(ctx context.Context, choice uint64) (string, error) {
	return sw.changeSpec(ctx, choice, func(s *dbv1.DatabaseClusterSpec) {
		to := int32(3 + 2*(choice%2))
		s.Replicas = &to
	})
}

// changeImage sets spec.image to one of simImages.
func (sw *simWorld) changeImage(ctx context.Context, choice uint64) (string, error) {
	return sw.changeSpec(ctx, choice, func(s *dbv1.DatabaseClusterSpec) { s.Image = simImages[choice%uint64(len(simImages))] })
}

// podUnready fails one member pod's readiness probe.
func (sw *simWorld) podUnready(ctx context.Context, choice uint64) (string, error) {
	pod := fmt.Sprintf("db-%d", choice%sw.members())
	if err := sw.noteFailure(ctx, pod); err != nil {
		return "", err
	}
	sw.sts.SetReady(false, simNamespace, pod)
	return pod + " fails its readiness probe", nil
}

// memberFails makes etcd report one member unhealthy.
func (sw *simWorld) memberFails(ctx context.Context, choice uint64) (string, error) {
	name := fmt.Sprintf("db-%d", choice%sw.members())
	if err := sw.noteFailure(ctx, name); err != nil {
		return "", err
	}
	// etcd's /readyz fails with the member, and with it the pod's
	// readiness probe.
	sw.processes.Fail(name, true)
	sw.sts.SetReady(false, simNamespace, name)
	return "etcd reports " + name + " unhealthy; its readiness probe fails", nil
}

// deletePod deletes one member pod.
func (sw *simWorld) deletePod(ctx context.Context, choice uint64) (string, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: fmt.Sprintf("db-%d", choice%sw.members())}}
	if err := sw.noteFailure(ctx, pod.Name); err != nil {
		return "", err
	}
	if err := sw.w.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	return pod.Name + " deleted", nil
}

// loseVolume deletes one member's volume claim and pod. One volume at a
// time, from a healthy cluster of three or more: losing a majority's data
// is a disaster to restore from a snapshot, not something an operator may
// repair on its own.
func (sw *simWorld) loseVolume(ctx context.Context, choice uint64) (string, error) {
	name := fmt.Sprintf("db-%d", choice%sw.members())
	pods, err := sw.pods(ctx)
	if err != nil {
		return "", err
	}
	running := map[string]bool{}
	for _, p := range pods {
		running[p.Name] = p.DeletionTimestamp.IsZero() && framework.PodReady(&p) && sw.processes.Probe(&p)
	}
	voters, id := 0, uint64(0)
	for _, m := range sw.etcd.Members() {
		if m.Name == name {
			id = m.ID
		}
		if m.IsLearner || !m.Healthy || !running[m.Name] {
			return "no-op: a member is not healthy", nil
		}
		if err := sw.w.Client.Get(ctx, client.ObjectKey{Namespace: simNamespace, Name: "data-" + m.Name}, &corev1.PersistentVolumeClaim{}); err != nil {
			return "no-op: a member has no volume", client.IgnoreNotFound(err)
		}
		voters++
	}
	if voters < 3 {
		return "no-op: fewer than 3 healthy voters", nil
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: "data-" + name}}
	if err := sw.w.Client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: simNamespace, Name: name}}
	if err := sw.w.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	sw.replacing[name] = id
	return sw.armWithChange(choice, name+" lost its volume and was deleted"), nil
}

// deleteCluster is the user deleting the cluster. Rare: only one choice in
// four deletes, so most runs keep a cluster.
func (sw *simWorld) deleteCluster(ctx context.Context, choice uint64) (string, error) {
	if sw.deleted || choice%4 != 0 {
		return "no-op", nil
	}
	c, err := sw.cluster(ctx)
	if err != nil {
		return "", err
	}
	if err := sw.w.Client.Delete(ctx, c); err != nil {
		return "", err
	}
	sw.deleted = true
	return "the user deletes the cluster", nil
}

// members is how many members the perturbations pick from: the ordinals
// every size the run may have shares.
func (sw *simWorld) members() uint64 {
	if n := *sw.intent.Replicas; n < 3 {
		return uint64(n)
	}
	return 3
}
