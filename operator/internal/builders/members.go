package builders

import (
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Keys of the members ConfigMap: etcd reads them as its --initial-cluster
// and --initial-cluster-state flags.
const (
	EnvInitialCluster      = "ETCD_INITIAL_CLUSTER"
	EnvInitialClusterState = "ETCD_INITIAL_CLUSTER_STATE"
)

// Values of EnvInitialClusterState.
const (
	ClusterStateNew      = "new"
	ClusterStateExisting = "existing"
)

// MembersConfigMapName names the ConfigMap that tells a starting member
// which cluster to form or join.
func MembersConfigMapName(c *dbv1.DatabaseCluster) string { return c.Name + "-members" }

// MembersConfigMap is what a member reads when its container starts. While
// the cluster bootstraps, state is "new" and the initial cluster is every
// bootstrap member; afterwards state is "existing" and the initial cluster is
// the current membership, including a learner whose pod is about to start.
// A member that restarts with its data ignores both.
func MembersConfigMap(c *dbv1.DatabaseCluster, state string, members []string, o Options) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(MembersConfigMapName(c), c.Namespace).
		WithLabels(Labels(c)).
		WithOwnerReferences(ownerReference(c)).
		WithData(map[string]string{
			EnvInitialCluster:      InitialCluster(c, o, members...),
			EnvInitialClusterState: state,
		})
}

// DataClaimName is the name the StatefulSet controller gives a member's
// data volume claim.
func DataClaimName(member string) string { return DataVolumeName + "-" + member }

// InitialClusterMembers are the member names in an --initial-cluster value
// ("name=peerURL,..."), in order.
func InitialClusterMembers(v string) []string {
	var names []string
	for part := range strings.SplitSeq(v, ",") {
		if name, _, ok := strings.Cut(part, "="); ok && name != "" {
			names = append(names, name)
		}
	}
	return names
}
