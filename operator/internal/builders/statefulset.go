package builders

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// StatefulSet runs one etcd member per pod. Pods start in parallel (a new
// etcd cluster needs every initial member up to elect a leader), each with its
// own volume from spec.storage, and run under the restricted Pod Security
// Standard. replicas is decided by the membership, not read from the spec:
// the StatefulSet grows only after etcd knows the new member and shrinks only
// after etcd has let the old one go. Pods are replaced only when the
// operator deletes them (OnDelete), one member at a time, followers before
// the leader.
// Rule: membership-statefulset-follows
// Rule: rollout-on-delete
// Rule: rollout-one-at-a-time
// Rule: rollout-followers-first
// (See suites/reference/rules.go.) The spec must have passed
// validation.Cluster.
func StatefulSet(c *dbv1.DatabaseCluster, replicas int32, o Options) *appsv1ac.StatefulSetApplyConfiguration {
	return appsv1ac.StatefulSet(StatefulSetName(c), c.Namespace).
		WithLabels(Labels(c)).
		WithOwnerReferences(ownerReference(c)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(replicas).
			WithServiceName(HeadlessServiceName(c)).
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c))).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().
				WithType(appsv1.OnDeleteStatefulSetStrategyType)).
			WithPersistentVolumeClaimRetentionPolicy(appsv1ac.StatefulSetPersistentVolumeClaimRetentionPolicy().
				// A removed member's data can never rejoin (etcd would refuse its
				// old member ID), so its volume goes with it.
				WithWhenScaled(appsv1.DeletePersistentVolumeClaimRetentionPolicyType).
				WithWhenDeleted(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)).
			WithTemplate(podTemplate(c, o)).
			WithVolumeClaimTemplates(volumeClaimTemplate(c)))
}

func podTemplate(c *dbv1.DatabaseCluster, o Options) *corev1ac.PodTemplateSpecApplyConfiguration {
	return corev1ac.PodTemplateSpec().
		WithLabels(Labels(c)).
		WithSpec(corev1ac.PodSpec().
			WithEnableServiceLinks(false).
			WithTerminationGracePeriodSeconds(30).
			WithSecurityContext(restrictedPod()).
			WithTopologySpreadConstraints(spreadOverNodes(c)).
			WithContainers(container(c, o)))
}

// spreadOverNodes places the members one per node while there are nodes
// enough (skew at most 1 between the nodes that take pods), so that losing
// a node costs one member, not quorum. It is a rule, not a preference: as a
// preference the scheduler, weighing volume binding and the rest, put two of
// three members on one worker in three of three e2e runs. A restored
// cluster is the exception: its members' volumes are made by the restore
// Jobs, wherever those ran (all on one node when they share a snapshot
// claim on node-local storage), and each member must start where its volume
// is, so there the spread is only a preference. Tainted nodes (a control
// plane) are not counted, or a 3→5 scale-up on three workers would wait for
// them.
func spreadOverNodes(c *dbv1.DatabaseCluster) *corev1ac.TopologySpreadConstraintApplyConfiguration {
	return corev1ac.TopologySpreadConstraint().
		WithMaxSkew(1).
		WithTopologyKey(corev1.LabelHostname).
		WithWhenUnsatisfiable(whenUnspreadable(c)).
		WithNodeTaintsPolicy(corev1.NodeInclusionPolicyHonor).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c)))
}

func whenUnspreadable(c *dbv1.DatabaseCluster) corev1.UnsatisfiableConstraintAction {
	if c.Spec.RestoreFrom != nil {
		return corev1.ScheduleAnyway
	}
	return corev1.DoNotSchedule
}

func container(c *dbv1.DatabaseCluster, o Options) *corev1ac.ContainerApplyConfiguration {
	ctr := corev1ac.Container().
		WithName(ContainerName).
		WithImage(c.Spec.Image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand("etcd").
		WithArgs(EtcdArgs(c, o)...).
		WithEnv(corev1ac.EnvVar().WithName("POD_NAME").WithValueFrom(
			corev1ac.EnvVarSource().WithFieldRef(
				corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath("metadata.name")))).
		// The initial cluster changes with the membership; reading it from a
		// ConfigMap when the container starts keeps it out of the template,
		// so that a scale change restarts nobody.
		// Rule: membership-scaling-restarts-nobody
		WithEnvFrom(corev1ac.EnvFromSource().WithConfigMapRef(
			corev1ac.ConfigMapEnvSource().WithName(MembersConfigMapName(c)))).
		// etcd's last words (a lost data directory panics in raft) become the
		// termination message the operator reads to replace such a member.
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithPorts(
			containerPort(ClientPortName, ClientPort),
			containerPort(PeerPortName, PeerPort),
			containerPort(MetricsPortName, MetricsPort),
		).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(DataVolumeName).WithMountPath(DataMountPath)).
		// Readiness is probed every second on the client port, which etcd
		// opens at once but serves only after the member has published
		// itself through raft: a probe sent in between waits (up to its 1 s
		// timeout) and is answered the moment etcd serves. The metrics port
		// would answer /readyz earlier, several seconds before clients are
		// served after a restart (the peers' old raft streams are still being
		// dropped), and count the member healthy too early.
		// /readyz does a linearizable read, which hangs on a member cut off
		// from the leader: a 1 s timeout and two failures make such a member
		// unready 2–3 s after the cut (etcd's own election timeout is 1 s),
		// so the operator, which watches readiness, reports it within the
		// chaos tier's 5 s budget.
		// There is no startup probe: the kubelet probes readiness only once
		// a startup probe has passed, on that probe's next tick, which cost
		// a restarted member a second of its four (make bench-e2e). A member
		// catching up on a large snapshot is instead spared by liveness
		// starting 3 minutes after the container; liveness stays slow, as
		// restarting etcd is costly, and asks the metrics port, which answers
		// while the member is joining: a member that cannot reach a quorum
		// stays unready, not restarted.
		WithLivenessProbe(probe("/livez", MetricsPortName, 10, 5, 6).WithInitialDelaySeconds(180)).
		WithReadinessProbe(probe("/readyz", ClientPortName, 1, 1, 2)).
		WithSecurityContext(restrictedContainer())
	if len(c.Spec.Resources.Limits) > 0 {
		ctr.WithResources(corev1ac.ResourceRequirements().WithLimits(c.Spec.Resources.Limits))
	}
	if len(c.Spec.Resources.Requests) > 0 {
		if ctr.Resources == nil {
			ctr.WithResources(corev1ac.ResourceRequirements())
		}
		ctr.Resources.WithRequests(c.Spec.Resources.Requests)
	}
	return ctr
}

// EtcdArgs are the etcd flags of every member. $(POD_NAME) is expanded by the
// kubelet, so one template serves every ordinal. The initial cluster and its
// state come from the members ConfigMap, as ETCD_* variables.
func EtcdArgs(c *dbv1.DatabaseCluster, o Options) []string {
	self := "$(POD_NAME)"
	return []string{
		"--name=" + self,
		"--data-dir=" + DataDir,
		fmt.Sprintf("--listen-client-urls=http://0.0.0.0:%d", ClientPort),
		fmt.Sprintf("--listen-peer-urls=http://0.0.0.0:%d", PeerPort),
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", MetricsPort),
		"--advertise-client-urls=" + ClientURL(c, self, o),
		"--initial-advertise-peer-urls=" + PeerURL(c, self, o),
		"--initial-cluster-token=" + ClusterToken(c),
	}
}

func containerPort(name string, port int32) *corev1ac.ContainerPortApplyConfiguration {
	return corev1ac.ContainerPort().WithName(name).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)
}

func probe(path, port string, period, timeout, failures int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().
			WithPath(path).
			WithPort(intstr.FromString(port)).
			WithScheme(corev1.URISchemeHTTP)).
		WithPeriodSeconds(period).
		WithTimeoutSeconds(timeout).
		WithFailureThreshold(failures)
}

func volumeClaimTemplate(c *dbv1.DatabaseCluster) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	// volumeClaimTemplates is an atomic list: every field the API server
	// defaults in it counts as ours, so defaulted fields are set explicitly.
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithVolumeMode(corev1.PersistentVolumeFilesystem).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: c.Spec.Storage.Size}))
	if c.Spec.Storage.StorageClassName != nil {
		spec.WithStorageClassName(*c.Spec.Storage.StorageClassName)
	}
	// A claim template carries neither kind nor namespace, so it is built
	// without the constructor that sets them.
	return (&corev1ac.PersistentVolumeClaimApplyConfiguration{}).
		WithName(DataVolumeName).
		WithLabels(SelectorLabels(c)).
		WithSpec(spec)
}
