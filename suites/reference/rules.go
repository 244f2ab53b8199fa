package reference

// Rule is one rule the reference operator's docs or doc comments state about
// membership changes, rollouts or small clusters. Where a rule is stated, a
// marker names it: a "Rule: <id>" comment line in Go, an HTML comment
// "<!-- rule: <id> -->" in markdown. TestEveryDocumentedRuleHasAnInvariant
// holds this table, the markers and the simulation's invariants to each
// other: a rule stated without a row, or a row whose invariant does not
// exist, fails it. A golden transcript may show a rule in action; the
// invariant is what checks it, after every step of every simulated run.
type Rule struct {
	// ID is the rule's stable name, as its markers spell it.
	ID string
	// Source is the file, from the repository's root, that states the rule
	// and carries its marker (others may restate it with the same marker).
	Source string
	// Says is the rule in one line.
	Says string
	// Invariant is the Name of the simulation invariant that checks it.
	Invariant string
}

// Names of the simulation invariants the documented rules rest on.
const (
	InvQuorumKept           = "operator actions never take ready members below quorum"
	InvOneLearner           = "at most one membership change in flight"
	InvLeaderHandedOver     = "a leader is never removed before handing over"
	InvNoRefusedChange      = "the operator asks etcd for no membership change that breaks quorum"
	InvOneChangePerPass     = "at most one membership change per operator pass"
	InvQuorumTable          = "every membership change meets its row of the quorum table"
	InvLeaderToHealthyVoter = "leadership moves only to a healthy voter"
	InvLearnerFirst         = "no other membership change while a learner is in flight"
	InvReplaceLostFirst     = "a member that lost its data is replaced before any scale step"
	InvRemoveTopOrLost      = "a voter is removed only from the top beyond the spec, or when its data is lost"
	InvAddLowest            = "a scale-up adds the lowest missing ordinal, within the spec"
	InvStatefulSetFollows   = "the StatefulSet grows after a member is registered, shrinks after it is gone"
	InvTemplateFromSpec     = "the pod template changes only with the spec (scaling restarts nobody)"
	InvWaitSaysWhy          = "Progressing is True while etcd's membership differs from the spec"
	InvOnDelete             = "the StatefulSet rolls nothing by itself (OnDelete)"
	InvRollOneAtATime       = "a roll replaces one member at a time"
	InvRollOnlyHealthy      = "a roll replaces a member only while every member is a healthy voter"
	InvRollFollowersFirst   = "a roll replaces the highest outdated follower first"
	InvRollLeaderHandsOver  = "a roll moves leadership to an updated member before replacing the leader"
	InvSmallNotRolled       = "a cluster of one or two voters is never rolled"
	InvSmallSaysWhy         = "a small cluster's refused roll shows in Progressing"
)

// Where the rules are stated.
const (
	srcMembership  = "operator/internal/controller/membership.go"
	srcMemberStep  = "operator/internal/controller/memberchange.go"
	srcRolling     = "operator/internal/controller/rolling.go"
	srcStatefulSet = "operator/internal/builders/statefulset.go"
	srcReadme      = "operator/README.md"
)

// DocumentedRules are the rules about membership changes, rollouts and small
// clusters, each with the invariant that checks it. Admission rules (the
// quorum-safe scale-down the webhook enforces) have their own test,
// TestEveryAdmissionRuleOnEveryPath in suites/integration.
var DocumentedRules = []Rule{
	// Membership changes.
	{ID: "membership-one-change-per-pass", Source: srcMembership, Invariant: InvOneChangePerPass,
		Says: "membership changes go through etcd's API, one per pass"},
	{ID: "membership-one-at-a-time", Source: srcMemberStep, Invariant: InvOneLearner,
		Says: "one change at a time: never two learners in flight"},
	{ID: "membership-keeps-quorum", Source: srcMembership, Invariant: InvNoRefusedChange,
		Says: "a change is made only when the cluster keeps a quorum of healthy voters through it"},
	{ID: "membership-quorum-table", Source: srcMembership, Invariant: InvQuorumTable,
		Says: "add needs healthy >= quorum(V); promote needs L healthy and healthy+1 >= quorum(V+1); removing voter X needs healthy-(X healthy) >= quorum(V-1); every voter change needs healthy >= quorum(V)"},
	{ID: "membership-leader-to-healthy-voter", Source: srcMembership, Invariant: InvLeaderToHealthyVoter,
		Says: "leadership moves only to a healthy voter"},
	{ID: "membership-wait-says-why", Source: srcMembership, Invariant: InvWaitSaysWhy,
		Says: "a step whose rule does not hold is not taken: the pass requeues and Progressing says why"},
	{ID: "membership-statefulset-follows", Source: srcMembership, Invariant: InvStatefulSetFollows,
		Says: "the StatefulSet grows only after a learner is registered and shrinks only after the member is gone"},
	{ID: "membership-learner-first", Source: srcMemberStep, Invariant: InvLearnerFirst,
		Says: "a learner in flight is finished (promoted or removed) before any other change"},
	{ID: "membership-replace-lost-first", Source: srcMemberStep, Invariant: InvReplaceLostFirst,
		Says: "a wanted member that lost its data is replaced before any scale step"},
	{ID: "membership-scale-down-highest", Source: srcMemberStep, Invariant: InvRemoveTopOrLost,
		Says: "a scale-down removes the highest ordinal beyond the spec"},
	{ID: "membership-scale-up-lowest", Source: srcMemberStep, Invariant: InvAddLowest,
		Says: "a scale-up adds the lowest missing ordinal, as a learner"},
	{ID: "membership-replace-only-lost", Source: srcMemberStep, Invariant: InvRemoveTopOrLost,
		Says: "a member within the spec is removed only when its pod came back without its data, to rejoin as a new member"},
	{ID: "membership-leader-handed-over", Source: srcMemberStep, Invariant: InvLeaderHandedOver,
		Says: "a scale-down moves leadership off the member it removes first"},
	{ID: "membership-scaling-restarts-nobody", Source: srcStatefulSet, Invariant: InvTemplateFromSpec,
		Says: "the pod template never changes with the membership, so scaling restarts nobody"},

	// Rollouts.
	{ID: "rollout-on-delete", Source: srcRolling, Invariant: InvOnDelete,
		Says: "the StatefulSet uses OnDelete: nothing rolls unless the operator deletes a pod"},
	{ID: "rollout-one-at-a-time", Source: srcRolling, Invariant: InvRollOneAtATime,
		Says: "members are replaced one at a time: one pod per pass, none while another member's pod is missing or unready"},
	{ID: "rollout-only-when-healthy", Source: srcRolling, Invariant: InvRollOnlyHealthy,
		Says: "a member is replaced only while every member is healthy and no membership change is in flight"},
	{ID: "rollout-followers-first", Source: srcRolling, Invariant: InvRollFollowersFirst,
		Says: "followers are replaced before the leader, highest ordinal first"},
	{ID: "rollout-leader-hands-over", Source: srcRolling, Invariant: InvRollLeaderHandsOver,
		Says: "when only the leader is left, leadership moves to an updated member before the leader is replaced"},

	// Small clusters.
	{ID: "small-cluster-not-rolled", Source: srcRolling, Invariant: InvSmallNotRolled,
		Says: "a cluster of one or two members tolerates no member down, so it is not rolled at all"},
	{ID: "small-cluster-says-why", Source: srcRolling, Invariant: InvSmallSaysWhy,
		Says: "a small cluster's refused roll shows as Progressing=True, reason WaitingForQuorum"},
}
