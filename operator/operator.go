// Package operator is the public surface of the reference DatabaseCluster
// operator: what its manager, the Gauntlet suites and anyone embedding the
// operator need to build and drive the reconciler. The implementation lives
// in operator/internal and may change freely behind these names.
package operator

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup"
	"github.com/gauntlet-dev/gauntlet/operator/internal/builders"
	"github.com/gauntlet-dev/gauntlet/operator/internal/controller"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd"
	"github.com/gauntlet-dev/gauntlet/operator/internal/etcd/etcdfake"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
	"github.com/gauntlet-dev/gauntlet/operator/internal/storageversion"
	"github.com/gauntlet-dev/gauntlet/operator/internal/webhook"
)

// The reconciler and what it is built from.
type (
	// Reconciler reconciles DatabaseClusters.
	Reconciler = controller.Reconciler
	// Snapshotter takes the final snapshot before a deletion.
	Snapshotter = controller.Snapshotter
	// BuilderOptions are cluster-wide settings of the desired objects.
	BuilderOptions = builders.Options
	// MetricsRecorder holds the operator's own metrics.
	MetricsRecorder = metrics.Recorder
	// ForeignChildError reports a child controlled by someone else.
	ForeignChildError = controller.ForeignChildError
	// SetupOptions tune Reconciler.SetupWithManager.
	SetupOptions = controller.SetupOptions
	// WebhookValidator is the DatabaseCluster admission validator.
	WebhookValidator = webhook.Validator
)

// etcd membership.
type (
	// EtcdMember is one etcd member.
	EtcdMember = etcd.Member
	// EtcdClient manages the membership of one etcd cluster.
	EtcdClient = etcd.Client
	// EtcdDialer opens an EtcdClient.
	EtcdDialer = etcd.Dialer
	// FakeEtcd is a scripted in-memory etcd cluster for tests.
	FakeEtcd = etcdfake.Cluster
	// FakeEtcdCall is one call recorded by FakeEtcd.
	FakeEtcdCall = etcdfake.Call
)

// FieldOwner is the server-side-apply field manager of every child.
const FieldOwner = controller.FieldOwner

// MissingReferenceRecheck is how soon a pass blocked on a missing
// StorageClass or restore claim looks again.
const MissingReferenceRecheck = controller.MissingReferenceRecheck

// Metric names.
const (
	MetricReconcileDuration = metrics.ReconcileDurationName
	MetricMembers           = metrics.MembersName
	MetricQuorumAtRisk      = metrics.QuorumAtRiskName
)

// Methods of FakeEtcd that can be scripted to fail.
const (
	EtcdMethodDial        = etcdfake.MethodDial
	EtcdMethodListMembers = etcdfake.MethodListMembers
	EtcdMethodAddLearner  = etcdfake.MethodAddLearner
	EtcdMethodPromote     = etcdfake.MethodPromote
	EtcdMethodRemove      = etcdfake.MethodRemove
	EtcdMethodMoveLeader  = etcdfake.MethodMoveLeader
	EtcdMethodSnapshot    = etcdfake.MethodSnapshot
)

var (
	// NewMetricsRecorder creates the operator's metrics on a registry.
	NewMetricsRecorder = metrics.NewRecorder
	// NewFakeEtcd returns an empty scripted etcd cluster.
	NewFakeEtcd = etcdfake.New
	// StatefulSetReadinessChanged is the predicate on owned StatefulSets.
	StatefulSetReadinessChanged = controller.StatefulSetReadinessChanged
	// FieldIndexes are the cache indexes the controller lists by; a fake
	// client that serves it must have them.
	FieldIndexes = controller.FieldIndexes
	// ClusterChanged is the predicate on DatabaseClusters: spec changes,
	// the start of deletion and the finalizer's arrival.
	ClusterChanged = controller.ClusterChanged
	// Quorum is the majority of a number of voting members.
	Quorum = etcd.Quorum
	// FaultTolerance is how many voting members can fail while a quorum remains.
	FaultTolerance = etcd.FaultTolerance
	// SetupWebhookWithManager serves the validating webhook from a manager.
	SetupWebhookWithManager = webhook.SetupWithManager
	// ControllerName is the controller's name in metrics and logs.
	ControllerName = controller.ControllerName

	// Names and URLs of a cluster's children and members.
	StatefulSetName     = builders.StatefulSetName
	HeadlessServiceName = builders.HeadlessServiceName
	ClientServiceName   = builders.ClientServiceName
	PDBName             = builders.PodDisruptionBudgetName
	MemberName          = builders.MemberName
	PeerURL             = builders.PeerURL
	SelectorLabels      = builders.SelectorLabels
	// MembersConfigMapName names the ConfigMap a starting member reads its
	// initial cluster (EnvInitialCluster) and state (EnvInitialClusterState,
	// ClusterStateNew or ClusterStateExisting) from.
	MembersConfigMapName = builders.MembersConfigMapName
	// InitialClusterMembers reads the member names of an initial-cluster value.
	InitialClusterMembers = builders.InitialClusterMembers
	// BackupCronJobName names the CronJob of a cluster's scheduled backups.
	BackupCronJobName = builders.BackupCronJobName
	// BackupJobLabels are on every backup Job and its pods.
	BackupJobLabels = builders.BackupJobLabels
	// BackupJobCluster maps a backup Job or its pod to its cluster's request,
	// as the controller's watch does.
	BackupJobCluster = controller.BackupJobCluster
	// SnapshotClaimName names the claim that keeps a cluster's snapshots and backups.
	SnapshotClaimName = builders.SnapshotClaimName
)

// BackupContainer is the backup Job's container; its termination message is
// a JSON BackupReport.
const BackupContainer = builders.BackupContainer

// Scheduled backups, for harnesses that play the backup Job: RunBackup is
// what /backup runs, with the retention policy and a Store of the caller's.
type (
	// BackupReport is what a backup Job reports.
	BackupReport = backup.Report
	// BackupOptions are one backup run's inputs.
	BackupOptions = backup.Options
	// BackupPolicy is a retention policy.
	BackupPolicy = backup.Policy
	// BackupStore is where backups are kept.
	BackupStore = backup.Store
	// BackupFileStatus is what verifying a snapshot file finds.
	BackupFileStatus = backup.Status
)

// RunBackup takes, verifies and stores one backup, then applies retention.
var RunBackup = backup.Run

// ParseBackupName tells when a backup was taken, if the name is the
// cluster's backup.
var ParseBackupName = backup.ParseName

// StorageVersionMigrator rewrites a CRD's stored objects in its storage
// version and trims status.storedVersions; the manager runs one at start.
type StorageVersionMigrator = storageversion.Migrator

// Keys and values of the members ConfigMap, and names in the pod template.
const (
	DataVolumeName         = builders.DataVolumeName
	ContainerName          = builders.ContainerName
	EnvInitialCluster      = builders.EnvInitialCluster
	EnvInitialClusterState = builders.EnvInitialClusterState
	ClusterStateNew        = builders.ClusterStateNew
	ClusterStateExisting   = builders.ClusterStateExisting
)

// NewScheme returns a scheme with the built-in kinds, both DatabaseCluster
// versions and CustomResourceDefinition.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := dbv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := dbv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	// The migrator and the certificate manager read and write the CRD.
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
