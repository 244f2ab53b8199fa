package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// benchInterval is how often a bring-up measurement reads the cluster: its
// figures are this precise.
const benchInterval = 100 * time.Millisecond

// benchStorageClass binds claims to volumes made ahead of time (no
// provisioner): a bring-up on it measures the operator and etcd, not the
// cluster's volume provisioner.
const benchStorageClass = "gauntlet-bench-preprovisioned"

// PreProvision makes n local volumes of size for the claims of a cluster,
// spread over the schedulable nodes, under benchStorageClass (created when
// missing); they are deleted when the test ends. It needs a kind cluster
// the harness created, whose nodes it can prepare directories on.
func PreProvision(ctx context.Context, t *testing.T, in SpecInput, n int, size resource.Quantity) {
	t.Helper()
	g := NewWithT(t)
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: benchStorageClass}, Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer), ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain)}
	if err := in.Env.Client.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	names := SchedulableNodes(ctx, t, in)
	g.Expect(names).NotTo(BeEmpty(), "no schedulable node")
	for i := range n {
		// Each node gets n volumes: the spread decides where members go.
		for _, node := range names {
			name := fmt.Sprintf("%s-%s-%d", in.Namespace, node, i)
			dir := "/var/local-path-provisioner/bench/" + name
			g.Expect(in.Env.Cluster.NodeCommand(ctx, node, "mkdir", "-m", "0777", "-p", dir)).To(Succeed())
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              benchStorageClass,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
					}}}},
				},
			}
			g.Expect(in.Env.Client.Create(ctx, pv)).To(Succeed())
			t.Cleanup(func() {
				ctx := context.WithoutCancel(ctx)
				_ = in.Env.Client.Delete(ctx, pv)
				_ = in.Env.Cluster.NodeCommand(ctx, node, "rm", "-rf", dir)
			})
		}
	}
}

// BringUp is one bring-up round on a real cluster: seconds from the request
// to the settled status (Healthy: Available, neither Progressing nor
// Degraded, every member a healthy voter).
type BringUp struct {
	// Create is a new 3-member cluster on volumes made ahead of time, from
	// Create to Healthy(3): the operator's and etcd's part.
	Create time.Duration
	// CreateProvisioned is the same on the cluster's default storage
	// class, whose provisioner makes each volume on demand.
	CreateProvisioned time.Duration
	// ScaleUp is 3→5, from the update to Healthy(5).
	ScaleUp time.Duration
	// PodDelete is a member pod deleted from the 5-member cluster, from the
	// delete to its replacement running and Healthy(5) again.
	PodDelete time.Duration
	// CreateSteps and CreateProvisionedSteps say where the time went, from
	// the API server's own timestamps (whole seconds).
	CreateSteps, CreateProvisionedSteps string
	// PodDeleteSteps says where the pod-delete recovery's time went.
	PodDeleteSteps string
}

// createSteps reads, for the members of a just-settled cluster, when (after
// the cluster's creation) the last one was scheduled, had its container
// running and turned ready, and when the cluster turned Available.
func createSteps(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster) string {
	t.Helper()
	pods := &corev1.PodList{}
	NewWithT(t).Expect(in.Env.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(operator.SelectorLabels(c)))).To(Succeed())
	t0 := c.CreationTimestamp.Time
	var scheduled, running, ready time.Time
	latest := func(at *time.Time, t time.Time) {
		if t.After(*at) {
			*at = t
		}
	}
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			switch cond.Type {
			case corev1.PodScheduled:
				latest(&scheduled, cond.LastTransitionTime.Time)
			case corev1.PodReady:
				latest(&ready, cond.LastTransitionTime.Time)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				latest(&running, cs.State.Running.StartedAt.Time)
			}
		}
	}
	var available time.Time
	if cond := meta.FindStatusCondition(c.Status.Conditions, dbv1.ConditionAvailable); cond != nil {
		available = cond.LastTransitionTime.Time
	}
	at := func(t time.Time) string { return fmt.Sprintf("+%.0fs", t.Sub(t0).Seconds()) }
	return fmt.Sprintf("last member scheduled %s, running %s, ready %s; Available %s", at(scheduled), at(running), at(ready), at(available))
}

// BringUpRound measures one BringUp in its own namespace (in.Namespace).
func BringUpRound(ctx context.Context, t *testing.T, in SpecInput) BringUp {
	t.Helper()
	g := NewWithT(t)
	var b BringUp
	prov := reference.NewCluster(in.Namespace, "provisioned").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()
	start := time.Now()
	g.Expect(in.Env.Client.Create(ctx, prov)).To(Succeed())
	b.CreateProvisioned = waitSettled(ctx, t, in, prov, 3, start)
	b.CreateProvisionedSteps = createSteps(ctx, t, in, prov)
	g.Expect(in.Env.Client.Delete(ctx, prov)).To(Succeed())

	c := reference.NewCluster(in.Namespace, "bench").WithImage(in.Env.EtcdImage).WithDeletionPolicy(dbv1.DeletionPolicyDelete).
		WithStorage("1Gi", ptr.To(benchStorageClass)).Build()
	PreProvision(ctx, t, in, 5, resource.MustParse("1Gi"))
	start = time.Now()
	g.Expect(in.Env.Client.Create(ctx, c)).To(Succeed())
	b.Create = waitSettled(ctx, t, in, c, 3, start)
	b.CreateSteps = createSteps(ctx, t, in, c)

	start = time.Now()
	g.Expect(Update(ctx, in, c, func(c *dbv1.DatabaseCluster) { c.Spec.Replicas = ptr.To[int32](5) })).To(Succeed())
	b.ScaleUp = waitSettled(ctx, t, in, c, 5, start)

	victim := &corev1.Pod{}
	key := client.ObjectKey{Namespace: in.Namespace, Name: operator.MemberName(c, 1)}
	g.Expect(in.Env.Client.Get(ctx, key, victim)).To(Succeed())
	start = time.Now()
	g.Expect(in.Env.Client.Delete(ctx, victim)).To(Succeed())
	// The status may still show the old pod healthy for a moment: first the
	// replacement (a new UID) must run and be ready. Each step is timed when
	// first seen (a read every benchInterval).
	var steps podDeleteSteps
	see := func(at *time.Duration) {
		if *at == 0 {
			*at = time.Since(start)
		}
	}
	err := framework.PollFor(ctx, key.Name+"'s replacement to be ready", availableTimeout, benchInterval, func(ctx context.Context) (bool, string, error) {
		p := &corev1.Pod{}
		if err := in.Env.Client.Get(ctx, key, p); err != nil {
			if apierrors.IsNotFound(err) {
				see(&steps.gone)
				return false, "deleted, not yet recreated", nil
			}
			return false, err.Error(), nil
		}
		if p.UID == victim.UID {
			return false, fmt.Sprintf("the old pod, terminating since %s", p.DeletionTimestamp), nil
		}
		see(&steps.gone)
		see(&steps.created)
		if p.Spec.NodeName != "" {
			see(&steps.scheduled)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				see(&steps.running)
			}
		}
		ready := framework.PodReady(p)
		if ready {
			see(&steps.ready)
		}
		return ready, fmt.Sprintf("uid %s, phase %s, ready %v", p.UID, p.Status.Phase, ready), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	b.PodDelete = waitSettled(ctx, t, in, c, 5, start)
	b.PodDeleteSteps = steps.String()
	return b
}

// podDeleteSteps are when a deleted member's pod was first seen gone, its
// replacement created, scheduled, running and ready, as offsets from the
// delete; zero when not seen (a step shorter than a read interval).
type podDeleteSteps struct {
	gone, created, scheduled, running, ready time.Duration
}

func (s podDeleteSteps) String() string {
	at := func(d time.Duration) string {
		if d == 0 {
			return "unseen"
		}
		return fmt.Sprintf("+%.1fs", d.Seconds())
	}
	return fmt.Sprintf("old pod gone %s, replacement created %s, scheduled %s, running %s, ready %s",
		at(s.gone), at(s.created), at(s.scheduled), at(s.running), at(s.ready))
}

// waitSettled waits until Healthy(c, n), reading every benchInterval, and
// returns the time since start.
func waitSettled(ctx context.Context, t *testing.T, in SpecInput, c *dbv1.DatabaseCluster, n int, start time.Time) time.Duration {
	t.Helper()
	waitHealthyEvery(ctx, t, in, c, n, benchInterval)
	return time.Since(start)
}

// BringUpFigure is one figure of a series of rounds, with its goal.
type BringUpFigure struct {
	Name        string
	Median, Max time.Duration
	Goal        time.Duration // 0: no goal
}

// SummariseBringUps reduces rounds to the median and maximum of each figure.
func SummariseBringUps(rounds []BringUp) []BringUpFigure {
	pick := func(f func(BringUp) time.Duration) (med, maxd time.Duration) {
		ds := make([]time.Duration, len(rounds))
		for i, r := range rounds {
			ds[i] = f(r)
		}
		slices.Sort(ds)
		n := len(ds)
		if n == 0 {
			return 0, 0
		}
		med = ds[n/2]
		if n%2 == 0 {
			med = (ds[n/2-1] + ds[n/2]) / 2
		}
		return med, ds[n-1]
	}
	var out []BringUpFigure
	for _, f := range []struct {
		name string
		get  func(BringUp) time.Duration
		goal time.Duration
	}{
		{"3 members Available, 3 healthy voters (volumes made ahead)", func(b BringUp) time.Duration { return b.Create }, 7 * time.Second},
		{"3 members Available, 3 healthy voters (volumes provisioned on demand)", func(b BringUp) time.Duration { return b.CreateProvisioned }, 0},
		{"scale-up 3→5 settled (volumes made ahead)", func(b BringUp) time.Duration { return b.ScaleUp }, 0},
		{"member pod deleted → settled again", func(b BringUp) time.Duration { return b.PodDelete }, 3500 * time.Millisecond},
	} {
		med, maxd := pick(f.get)
		out = append(out, BringUpFigure{Name: f.name, Median: med, Max: maxd, Goal: f.goal})
	}
	return out
}

// FormatBringUps is the figures as a Markdown table: figure, median, max,
// goal (median), rounds.
func FormatBringUps(figs []BringUpFigure, rounds int) string {
	var b strings.Builder
	b.WriteString("| figure | median | max | goal (median) | rounds |\n|---|---|---|---|---|\n")
	for _, f := range figs {
		goal := "—"
		if f.Goal > 0 {
			verdict := "met"
			if f.Median > f.Goal {
				verdict = "not met"
			}
			goal = fmt.Sprintf("≤ %.1f s (%s)", f.Goal.Seconds(), verdict)
		}
		fmt.Fprintf(&b, "| %s | %.1f s | %.1f s | %s | %d |\n", f.Name, f.Median.Seconds(), f.Max.Seconds(), goal, rounds)
	}
	return b.String()
}
