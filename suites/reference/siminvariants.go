package reference

import (
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/sim"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func (sw *simWorld) readyPods(ctx context.Context) (int, error) {
	pods, err := sw.pods(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		// Readiness as the kubelet reports it: a failed member's pod stays
		// Ready until its probe fails, which is all an operator can know.
		if p.DeletionTimestamp.IsZero() && framework.PodReady(&p) {
			n++
		}
	}
	return n, nil
}

// invariants are checked after every step: the older ones first, then one
// per documented rule that none of them checks (ruleInvariants).
func (sw *simWorld) invariants() []sim.Invariant {
	return append([]sim.Invariant{
		{Name: "every child has a controller owner reference", Kind: sim.Safety, Check: sw.checkOwners},
		{Name: "the finalizer goes only after a final snapshot is recorded", Kind: sim.Safety, Check: sw.checkSnapshotBeforeFinalizer},
		{Name: InvQuorumKept, Kind: sim.Safety, Check: sw.checkQuorumKept},
		{Name: InvOneLearner, Kind: sim.Safety, Check: sw.checkOneMembershipChange},
		{Name: InvLeaderHandedOver, Kind: sim.Safety, Check: sw.checkLeaderHandedOver},
		{Name: InvNoRefusedChange, Kind: sim.Safety, Check: sw.checkNoRefusedChange},
		{Name: "the user's spec is never overwritten", Kind: sim.Safety, Check: sw.checkIntentKept},
		{Name: "Available only when a quorum is ready", Kind: sim.Honesty, Check: sw.checkAvailableHonest},
		{Name: "Reconciled only when the StatefulSet matches the spec", Kind: sim.Honesty, Check: sw.checkReconciledHonest},
	}, sw.ruleInvariants()...)
}

func (sw *simWorld) checkOwners(ctx context.Context, _ sim.StepInfo) error {
	for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}, &corev1.ConfigMapList{}} {
		if err := sw.w.Client.List(ctx, list, client.InNamespace(simNamespace)); err != nil {
			return err
		}
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			obj := it.(client.Object)
			ref := metav1.GetControllerOf(obj)
			if ref == nil || ref.Kind != "DatabaseCluster" || ref.Name != sw.key.Name {
				return fmt.Errorf("%T %s has no controller reference to DatabaseCluster %s (owners %v)", obj, obj.GetName(), sw.key.Name, obj.GetOwnerReferences())
			}
		}
	}
	return nil
}

func (sw *simWorld) checkSnapshotBeforeFinalizer(_ context.Context, s sim.StepInfo) error {
	for _, obj := range s.Deleted {
		c, ok := obj.(*dbv1.DatabaseCluster)
		// A cluster deleted before the operator added its finalizer never
		// had children, so never held data.
		if !ok || c.Spec.DeletionPolicy == dbv1.DeletionPolicyDelete || !slices.Contains(c.Finalizers, dbv1.Finalizer) {
			continue
		}
		snap := c.Status.LastSnapshot
		if snap == nil || !snap.Final {
			return fmt.Errorf("DatabaseCluster %s was removed without a final snapshot recorded after deletion began (lastSnapshot %+v)", c.Name, snap)
		}
	}
	return nil
}

func (sw *simWorld) checkQuorumKept(ctx context.Context, s sim.StepInfo) error {
	ready, err := sw.readyPods(ctx)
	if err != nil {
		return err
	}
	defer func() { sw.readyBefore = ready }()
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) || sw.deleted {
		return nil
	}
	if err != nil {
		return err
	}
	q := sw.quorum(c)
	if s.ByOperator && ready < q && sw.readyBefore >= q && ready < sw.readyBefore {
		return fmt.Errorf("a reconcile took ready members from %d to %d, below the quorum of %d", sw.readyBefore, ready, q)
	}
	// In etcd's own eyes too: a membership change must not leave fewer
	// healthy voters than a quorum of the voters it leaves.
	voters, healthy := 0, 0
	for _, m := range sw.etcd.Members() {
		if !m.IsLearner {
			voters++
			if m.Healthy {
				healthy++
			}
		}
	}
	now := voters > 0 && healthy >= operator.Quorum(voters)
	defer func() { sw.quorumBefore = now }()
	if s.ByOperator && sw.quorumBefore && !now {
		return fmt.Errorf("a reconcile left etcd with %d healthy of %d voters, below the quorum of %d", healthy, voters, operator.Quorum(voters))
	}
	return nil
}

// quorum is the majority of etcd's voting members (of the spec's size before
// the cluster has formed).
func (sw *simWorld) quorum(c *dbv1.DatabaseCluster) int {
	voters := 0
	for _, m := range sw.etcd.Members() {
		if !m.IsLearner {
			voters++
		}
	}
	if voters == 0 {
		voters = int(c.DesiredReplicas())
	}
	return operator.Quorum(voters)
}

// checkLeaderHandedOver: the operator moves leadership off a member before
// removing it, whenever another healthy voter can take over (the fake etcd
// records every removal of a leader).
func (sw *simWorld) checkLeaderHandedOver(context.Context, sim.StepInfo) error {
	if removed := sw.etcd.LeaderRemovals(); len(removed) > 0 {
		return fmt.Errorf("member(s) %v removed while leading, though another healthy voter could have taken over", removed)
	}
	return nil
}

// checkNoRefusedChange: etcd refuses a change that would break quorum, but
// safety must not rest on that: the operator's own gate must never ask.
func (sw *simWorld) checkNoRefusedChange(context.Context, sim.StepInfo) error {
	if refused := sw.etcd.Refusals(); len(refused) > 0 {
		return fmt.Errorf("etcd refused %d membership change(s) the operator asked for; the first: %s", len(refused), refused[0])
	}
	return nil
}

func (sw *simWorld) checkOneMembershipChange(context.Context, sim.StepInfo) error {
	learners := 0
	for _, m := range sw.etcd.Members() {
		if m.IsLearner {
			learners++
		}
	}
	if learners > 1 {
		return fmt.Errorf("%d learners at once", learners)
	}
	return nil
}

func (sw *simWorld) checkIntentKept(ctx context.Context, _ sim.StepInfo) error {
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if *c.Spec.Replicas != *sw.intent.Replicas || c.Spec.Image != sw.intent.Image {
		return fmt.Errorf("spec is replicas=%d image=%s but the user last wrote replicas=%d image=%s",
			*c.Spec.Replicas, c.Spec.Image, *sw.intent.Replicas, sw.intent.Image)
	}
	return nil
}

func (sw *simWorld) checkAvailableHonest(ctx context.Context, s sim.StepInfo) error {
	// Judged right after a reconcile that ran without a fault: one that read
	// a stale view, crashed or failed a call may leave status behind the
	// world, which is expected; a clean pass may not.
	if !s.ByOperator || s.Action.Fault.Kind != sim.NoFault {
		return nil
	}
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(c.Status.Conditions, dbv1.ConditionAvailable) || !c.DeletionTimestamp.IsZero() {
		return nil
	}
	ready, err := sw.readyPods(ctx)
	if err != nil {
		return err
	}
	if q := sw.quorum(c); ready < q {
		return fmt.Errorf("condition Available is True with %d ready members, quorum is %d", ready, q)
	}
	return nil
}

func (sw *simWorld) checkReconciledHonest(ctx context.Context, _ sim.StepInfo) error {
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	prog := meta.FindStatusCondition(c.Status.Conditions, dbv1.ConditionProgressing)
	if c.Status.ObservedGeneration != c.Generation || prog == nil || prog.Reason != dbv1.ReasonReconciled || prog.ObservedGeneration != c.Generation {
		return nil
	}
	sts := &appsv1.StatefulSet{}
	if err := sw.w.Client.Get(ctx, client.ObjectKey{Namespace: simNamespace, Name: operator.StatefulSetName(c)}, sts); err != nil {
		return fmt.Errorf("status says generation %d is reconciled, but the StatefulSet: %w", c.Generation, err)
	}
	if *sts.Spec.Replicas != *c.Spec.Replicas || sts.Spec.Template.Spec.Containers[0].Image != c.Spec.Image {
		return fmt.Errorf("status says generation %d is reconciled, but the StatefulSet has replicas=%d image=%s, spec wants %d %s",
			c.Generation, *sts.Spec.Replicas, sts.Spec.Template.Spec.Containers[0].Image, *c.Spec.Replicas, c.Spec.Image)
	}
	return nil
}

func (sw *simWorld) converged(ctx context.Context) error {
	c, err := sw.cluster(ctx)
	if apierrors.IsNotFound(err) {
		if !sw.deleted {
			return errors.New("the DatabaseCluster vanished without being deleted")
		}
		return nil
	}
	if err != nil {
		return err
	}
	if sw.deleted {
		return fmt.Errorf("the DatabaseCluster was deleted but is still there (finalizers %v)\n%s", c.Finalizers, framework.DescribeConditions(c.Status.Conditions))
	}
	var problems []string
	if c.Status.ObservedGeneration != c.Generation {
		problems = append(problems, fmt.Sprintf("observedGeneration %d, generation %d", c.Status.ObservedGeneration, c.Generation))
	}
	pods, err := sw.pods(ctx)
	if err != nil {
		return err
	}
	outdated := 0
	for _, p := range pods {
		if len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image != c.Spec.Image {
			outdated++
		}
	}
	voters, learners := 0, 0
	for _, m := range sw.etcd.Members() {
		if m.IsLearner {
			learners++
		} else {
			voters++
		}
	}
	if voters != int(*c.Spec.Replicas) || learners > 0 {
		problems = append(problems, fmt.Sprintf("etcd has %d voters and %d learners, spec.replicas %d", voters, learners, *c.Spec.Replicas))
	}
	// A cluster of one or two members tolerates no member down: the
	// operator refuses to roll it and says so.
	progressing := framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionFalse, dbv1.ReasonReconciled)
	switch {
	case outdated > 0 && operator.FaultTolerance(int(*c.Spec.Replicas)) == 0:
		progressing = framework.HaveCondition(dbv1.ConditionProgressing, metav1.ConditionTrue, dbv1.ReasonWaitingForQuorum)
	case outdated > 0:
		problems = append(problems, fmt.Sprintf("%d pods run an image other than %s", outdated, c.Spec.Image))
	}
	for _, m := range []*framework.ConditionMatcher{
		framework.HaveCondition(dbv1.ConditionAvailable, metav1.ConditionTrue, dbv1.ReasonQuorumHealthy),
		progressing,
		framework.HaveCondition(dbv1.ConditionDegraded, metav1.ConditionFalse, dbv1.ReasonAllMembersHealthy),
	} {
		if ok, _ := m.Match(c); !ok {
			problems = append(problems, "not "+fmt.Sprint(m.FailureMessage(c)))
		}
	}
	if c.Status.ReadyReplicas != *c.Spec.Replicas {
		problems = append(problems, fmt.Sprintf("status.readyReplicas %d, spec.replicas %d", c.Status.ReadyReplicas, *c.Spec.Replicas))
	}
	if len(problems) > 0 {
		return fmt.Errorf("not converged: %v", problems)
	}
	return nil
}
