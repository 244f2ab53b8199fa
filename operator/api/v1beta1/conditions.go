package v1beta1

// Condition types of a DatabaseCluster. Each condition has its own set of
// reasons below; a condition is always set with one of its reasons.
const (
	// ConditionAvailable is True when a quorum of members is healthy, so the
	// database accepts reads and writes.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the operator is moving the cluster
	// toward its spec: creating, scaling, rolling an image change or deleting.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when any expected member is missing or
	// unhealthy, or when the operator cannot act on the cluster.
	ConditionDegraded = "Degraded"
)

// Reasons for ConditionAvailable.
const (
	// ReasonQuorumHealthy: at least a quorum of voting members is healthy.
	ReasonQuorumHealthy = "QuorumHealthy"
	// ReasonQuorumLost: fewer than a quorum of members are healthy.
	ReasonQuorumLost = "QuorumLost"
	// ReasonBootstrapping: the cluster has not yet been available since it
	// was created; members are still starting. Degraded uses it too: missing
	// members are expected until the cluster first reaches quorum.
	ReasonBootstrapping = "Bootstrapping"
)

// Reasons for ConditionProgressing.
const (
	// ReasonCreating: children are being created and members are starting.
	ReasonCreating = "Creating"
	// ReasonScaling: the member count differs from spec.replicas.
	ReasonScaling = "Scaling"
	// ReasonRollingUpdate: members are being replaced with a new pod template.
	ReasonRollingUpdate = "RollingUpdate"
	// ReasonWaitingForQuorum: the next membership or rolling step would
	// leave fewer healthy voters than a quorum; the operator waits, and the
	// message says which step and why.
	ReasonWaitingForQuorum = "WaitingForQuorum"
	// ReasonReplacingMember: a member whose pod lost its data is being
	// removed and added back as a new member on a clean volume.
	ReasonReplacingMember = "ReplacingMember"
	// ReasonRestoring: members' volumes are being restored from
	// spec.restoreFrom before they first start.
	ReasonRestoring = "Restoring"
	// ReasonDeleting: the DatabaseCluster is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonReconciled: the cluster matches its spec.
	ReasonReconciled = "Reconciled"
	// ReasonBlocked: the operator cannot make progress until a user acts; the
	// message says what is in the way.
	ReasonBlocked = "Blocked"
	// ReasonInvalidSpec: the spec cannot be realised; it will not be retried
	// until the spec changes.
	ReasonInvalidSpec = "InvalidSpec"
)

// Reasons for ConditionDegraded.
const (
	// ReasonAllMembersHealthy: every expected member exists and is healthy.
	ReasonAllMembersHealthy = "AllMembersHealthy"
	// ReasonMembersUnhealthy: some expected members are missing or unhealthy;
	// the message names them.
	ReasonMembersUnhealthy = "MembersUnhealthy"
	// ReasonMemberAPIUnreachable: no member answered etcd's cluster API, so
	// health is inferred from pod readiness alone.
	ReasonMemberAPIUnreachable = "MemberAPIUnreachable"
	// ReasonForeignChild: an object the cluster needs already exists and is
	// controlled by something else; the operator neither adopts nor overwrites it.
	ReasonForeignChild = "ForeignChild"
	// ReasonSnapshotFailed: the final snapshot before deletion failed; the
	// finalizer stays and the snapshot is retried with backoff.
	ReasonSnapshotFailed = "SnapshotFailed"
	// ReasonBackupFailed: every member is healthy, but the last scheduled
	// backup failed; the message says why (status.lastBackup has the
	// details). The next scheduled run tries again.
	ReasonBackupFailed = "BackupFailed"
	// ReasonRestoreFailed: restoring a member from spec.restoreFrom failed;
	// the restore is retried, and the message says what the Job reported.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonReconcileError: a pass failed on an API error; it is retried with
	// backoff.
	ReasonReconcileError = "ReconcileError"
)
