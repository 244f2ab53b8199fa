// Package builders turns a DatabaseCluster into the desired state of its
// children as server-side-apply configurations. Every function here is pure:
// no client, no clock, no I/O, so each field can be tested in a table.
package builders

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Ports etcd listens on inside each member pod.
const (
	ClientPort  int32 = 2379
	PeerPort    int32 = 2380
	MetricsPort int32 = 2381
)

// Names of ports, volumes and containers.
const (
	ContainerName   = "etcd"
	DataVolumeName  = "data"
	DataMountPath   = "/var/lib/etcd"
	DataDir         = DataMountPath + "/data"
	ClientPortName  = "client"
	PeerPortName    = "peer"
	MetricsPortName = "metrics"
	// EtcdUID is the non-root user and group the etcd container runs as.
	EtcdUID int64 = 65532
	// DefaultClusterDomain is the DNS suffix of Services in most clusters.
	DefaultClusterDomain = "cluster.local"
	// ManagerName is the value of app.kubernetes.io/managed-by on every child.
	ManagerName = "gauntlet-operator"
)

// Well-known labels on every child; the selector uses Name and Instance only,
// because a StatefulSet's selector is immutable.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
)

// Options are the cluster-wide settings the builders need.
type Options struct {
	// ClusterDomain is the DNS suffix of Services, "cluster.local" when empty.
	ClusterDomain string
	// BackupImage runs the scheduled backups: an image with /backup, the
	// operator's own image.
	BackupImage string
}

func (o Options) domain() string {
	if o.ClusterDomain == "" {
		return DefaultClusterDomain
	}
	return o.ClusterDomain
}

// HeadlessServiceName is the governing Service of the StatefulSet; members
// resolve each other as <pod>.<headless>.<namespace>.svc.<domain>.
func HeadlessServiceName(c *dbv1.DatabaseCluster) string { return c.Name }

// ClientServiceName is the Service clients connect to.
func ClientServiceName(c *dbv1.DatabaseCluster) string { return c.Name + "-client" }

// StatefulSetName is the name of the members' StatefulSet.
func StatefulSetName(c *dbv1.DatabaseCluster) string { return c.Name }

// PodDisruptionBudgetName is the name of the quorum-keeping PDB.
func PodDisruptionBudgetName(c *dbv1.DatabaseCluster) string { return c.Name }

// MemberName is the pod (and etcd member) name of the given ordinal.
func MemberName(c *dbv1.DatabaseCluster, ordinal int) string {
	return fmt.Sprintf("%s-%d", StatefulSetName(c), ordinal)
}

// SelectorLabelName is the LabelName of every member pod.
const SelectorLabelName = "etcd"

// SelectorLabels select the member pods of one cluster.
func SelectorLabels(c *dbv1.DatabaseCluster) map[string]string {
	return map[string]string{
		LabelName:     SelectorLabelName,
		LabelInstance: c.Name,
	}
}

// Labels are put on every child and on the member pods.
func Labels(c *dbv1.DatabaseCluster) map[string]string {
	l := SelectorLabels(c)
	l[LabelManagedBy] = ManagerName
	l[LabelComponent] = "database"
	return l
}

// PeerURL is the URL other members use to reach the named member.
func PeerURL(c *dbv1.DatabaseCluster, member string, o Options) string {
	return fmt.Sprintf("http://%s:%d", memberHost(c, member, o), PeerPort)
}

// ClientURL is the URL clients (and the operator) use to reach the named member.
func ClientURL(c *dbv1.DatabaseCluster, member string, o Options) string {
	return fmt.Sprintf("http://%s:%d", memberHost(c, member, o), ClientPort)
}

func memberHost(c *dbv1.DatabaseCluster, member string, o Options) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", member, HeadlessServiceName(c), c.Namespace, o.domain())
}

// InitialCluster is etcd's --initial-cluster for the named members.
func InitialCluster(c *dbv1.DatabaseCluster, o Options, members ...string) string {
	parts := make([]string, 0, len(members))
	for _, name := range members {
		parts = append(parts, name+"="+PeerURL(c, name, o))
	}
	return strings.Join(parts, ",")
}

// MemberNames are the names of members 0..n-1.
func MemberNames(c *dbv1.DatabaseCluster, n int) []string {
	names := make([]string, n)
	for i := range n {
		names[i] = MemberName(c, i)
	}
	return names
}

// MemberOrdinal is the ordinal of a member name of this cluster, or false
// for a name that is not one of its pods'.
func MemberOrdinal(c *dbv1.DatabaseCluster, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, StatefulSetName(c)+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// ownerReference marks the DatabaseCluster as the controller of a child, so
// that garbage collection removes the child with it.
func ownerReference(c *dbv1.DatabaseCluster) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(dbv1.GroupVersion.String()).
		WithKind("DatabaseCluster").
		WithName(c.Name).
		WithUID(c.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// OwnerReference is the controller reference every child carries, as a plain
// object for comparisons in tests and in the controller.
func OwnerReference(c *dbv1.DatabaseCluster) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         dbv1.GroupVersion.String(),
		Kind:               "DatabaseCluster",
		Name:               c.Name,
		UID:                c.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}
