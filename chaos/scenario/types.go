// Package scenario is the file format of a chaos scenario: what operator to
// deploy, the custom resource under test, named roles that pick the
// fault's targets, the fault, an optional workload, and the assertions that
// judge the run. Files are YAML, versioned (apiVersion gauntlet.dev/v1alpha1)
// and strict: an unknown field, a missing one or a value the engine could
// not run is refused by Load with the file, line and field path of each
// mistake, before any cluster is touched.
//
// The package reads and checks files; it imports no test suite and no
// operator, so an operator author can use it alone.
package scenario

import (
	"regexp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIVersion is the version of every kind in this package.
const APIVersion = "gauntlet.dev/v1alpha1"

// Kinds of file.
const (
	KindScenario = "Scenario"
	KindOperator = "Operator"
)

// Metadata names a file's object.
type Metadata struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Scenario is one chaos scenario (kind: Scenario).
type Scenario struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   Metadata     `json:"metadata"`
	Spec       ScenarioSpec `json:"spec"`
}

// ScenarioSpec is the resource, its roles, the fault and the judgement.
type ScenarioSpec struct {
	// Variables are ${NAME} substitutions in every string of the scenario
	// and its manifests, with their defaults; the environment and --set
	// override them.
	Variables map[string]string `json:"variables,omitempty"`
	// Resource is the custom resource under test, created fresh for the
	// scenario in a namespace of its own.
	Resource Resource `json:"resource"`
	// PodSecurity is the Pod Security Standard level that namespace
	// enforces (default: the Operator file's, else restricted).
	PodSecurity string `json:"podSecurity,omitempty"`
	// Roles name sets of pods (or the API server) that the fault, the
	// actions and the workload refer to.
	Roles map[string]Role `json:"roles,omitempty"`
	// Fault is the Chaos Mesh experiment.
	Fault Fault `json:"fault"`
	// Before are actions taken once the resource converged, before the
	// fault is injected (it then acts on what they left: a recreate's
	// new object, a stale view as of the old one's deletion).
	Before []Action `json:"before,omitempty"`
	// During are actions taken once the fault is injected.
	During []Action `json:"during,omitempty"`
	// Workload runs from before the fault until the resource converged.
	Workload *Workload `json:"workload,omitempty"`
	// Assertions judge the run.
	Assertions Assertions `json:"assertions"`
}

// Resource is the custom resource under test.
type Resource struct {
	// Manifest is a YAML file holding the object, relative to the scenario.
	Manifest string `json:"manifest"`
	// Converged are CEL expressions over the object (as self) that must all
	// hold for it to count as converged, before the fault and after it.
	Converged []string `json:"converged"`
	// AllPodsReady also requires, for convergence, every pod in the
	// resource's namespace ready and none terminating (default true): the
	// resource's status may be stale while its operator cannot write it.
	AllPodsReady *bool `json:"allPodsReady,omitempty"`
	// ConvergeWithin bounds each wait for convergence (default 5m).
	ConvergeWithin metav1.Duration `json:"convergeWithin,omitempty"`
	// DeleteWithin bounds the wait for the resource to go once the run
	// deletes it (default 3m): its finalizers' work, such as a final
	// backup, must fit in it.
	DeleteWithin metav1.Duration `json:"deleteWithin,omitempty"`
}

// Role picks pods. Exactly one of Pods, Owned, From, Operator and
// APIServer is set.
type Role struct {
	// Pods selects pods by label in the resource's namespace.
	Pods map[string]string `json:"pods,omitempty"`
	// Owned selects the pods the resource under test owns: those of its
	// namespace whose chain of controller references (a Deployment's
	// ReplicaSet, a StatefulSet, a Job) leads to it. It needs no label of
	// the operator's choosing.
	Owned bool `json:"owned,omitempty"`
	// From narrows another role's pods.
	From string `json:"from,omitempty"`
	// Exclude removes the pods of other roles.
	Exclude []string `json:"exclude,omitempty"`
	// Probe keeps the pods whose probe answers as expected (the leader).
	Probe *Probe `json:"probe,omitempty"`
	// Pick chooses, with the seed, one of: all (default), one, minority
	// (the most members whose loss leaves a quorum of the whole set), or a
	// count such as "2".
	Pick string `json:"pick,omitempty"`
	// Operator is the operator's pods.
	Operator bool `json:"operator,omitempty"`
	// APIServer is the operator's path to the API server: its Service and
	// endpoint addresses (a partition peer only).
	APIServer bool `json:"apiServer,omitempty"`
}

// Probe asks each pod a question: an HTTP GET of Path on Port through a
// port-forward, or a command run in one of its containers (Exec).
type Probe struct {
	Port int32  `json:"port,omitempty"`
	Path string `json:"path,omitempty"`
	// Exec runs a command in the pod instead of an HTTP GET.
	Exec *ExecProbe `json:"exec,omitempty"`
	// Contains is what the answer (the body, or the command's output)
	// must contain.
	Contains string `json:"contains"`
}

// ExecProbe is a command run in a container of the pod.
type ExecProbe struct {
	Container string   `json:"container,omitempty"`
	Command   []string `json:"command"`
}

// Fault actions.
const (
	ActionPodKill       = "pod-kill"
	ActionContainerKill = "container-kill"
	ActionPodFailure    = "pod-failure"
	ActionPartition     = "partition"
	ActionBandwidth     = "bandwidth"
	ActionDelay         = "delay"
	ActionLoss          = "loss"
	// ActionNodeLoss stops the node of each target pod for the hold and
	// starts it again (the harness does it, not Chaos Mesh; a kind cluster
	// with workers only).
	ActionNodeLoss = "node-loss"
)

// View fault actions act on what the operator sees, through the API proxy
// the harness puts between it and the API server; Requests picks the
// requests they act on.
const (
	// ActionAPIError answers matching requests with an API error (Status).
	ActionAPIError = "api-error"
	// ActionAPIReset closes the connection of matching requests unanswered.
	ActionAPIReset = "api-reset"
	// ActionAPITimeout holds matching requests until the client gives up.
	ActionAPITimeout = "api-timeout"
	// ActionAPILatency delays matching requests by Latency.
	ActionAPILatency = "api-latency"
	// ActionKillAfterWrite kills the operator right after its After-th
	// matching write succeeded: it restarts between two writes of a pass
	// (Sieve's intermediate state).
	ActionKillAfterWrite = "kill-after-write"
	// ActionStaleView serves matching reads and re-lists from an earlier
	// point (the resource's creation, or Lag before the injection) and
	// holds their watch events, as an API server whose cache lags (Sieve's
	// stale state).
	ActionStaleView = "stale-view"
	// ActionWatchDelay holds matching watch events for Latency (for the
	// hold when 0); ActionWatchDrop drops them; ActionWatchCoalesce
	// delivers only the last event of each object at the heal
	// (Sieve's unobserved state).
	ActionWatchDelay    = "watch-delay"
	ActionWatchDrop     = "watch-drop"
	ActionWatchCoalesce = "watch-coalesce"
	// ActionWatchClose ends matching watch streams at the injection
	// (with Expire, as a too-old resourceVersion, forcing a re-list).
	ActionWatchClose = "watch-close"
)

// ActionNone injects nothing: the during actions run for the hold and the
// scenario is judged as any other (the harness's own actions, such as a
// member's pod deleted with its volume, or a fault-free baseline).
const ActionNone = "none"

// ChaosActions are the faults Chaos Mesh (or the harness, node-loss)
// makes on a cluster's pods and nodes.
var ChaosActions = []string{ActionPodKill, ActionContainerKill, ActionPodFailure, ActionPartition, ActionBandwidth, ActionDelay, ActionLoss, ActionNodeLoss}

// ViewActions are the faults the API proxy makes in the operator's view.
var ViewActions = []string{ActionAPIError, ActionAPIReset, ActionAPITimeout, ActionAPILatency, ActionKillAfterWrite,
	ActionStaleView, ActionWatchDelay, ActionWatchDrop, ActionWatchCoalesce, ActionWatchClose}

// Actions lists every fault action, in the docs' order.
var Actions = append(append(append([]string(nil), ChaosActions...), ViewActions...), ActionNone)

// IsViewAction says whether action is a view fault.
func IsViewAction(action string) bool { return slices.Contains(ViewActions, action) }

// Fault is one Chaos Mesh experiment on a role's pods, or a node-loss.
type Fault struct {
	Action string `json:"action"`
	// Target is the role whose pods the fault hits (none: no target).
	Target string `json:"target,omitempty"`
	// Peer is the other side of a partition: a role of pods, or a role
	// with apiServer.
	Peer string `json:"peer,omitempty"`
	// Container is the container a container-kill kills.
	Container string `json:"container,omitempty"`
	// Rate is a bandwidth limit, such as 1mbps.
	Rate string `json:"rate,omitempty"`
	// Latency is a delay's added latency.
	Latency metav1.Duration `json:"latency,omitempty"`
	// LossPercent is a loss's share of packets dropped (1-100).
	LossPercent int `json:"lossPercent,omitempty"`
	// Hold is how long the fault stays injected (default 20s).
	Hold metav1.Duration `json:"hold,omitempty"`

	// Requests picks the operator's requests a view fault acts on.
	Requests *RequestMatch `json:"requests,omitempty"`
	// Status is an api-error's HTTP status: 409, 429, 500, 503 or 504.
	Status int `json:"status,omitempty"`
	// RetryAfter goes with an api-error of 429 or 503.
	RetryAfter metav1.Duration `json:"retryAfter,omitempty"`
	// After is kill-after-write's count of matching writes that succeed
	// before the operator is killed.
	After int `json:"after,omitempty"`
	// Lag is how far behind a stale-view's reads are: they are served as
	// the proxy recorded them Lag before the injection (0: as of the
	// injection, frozen for the hold).
	Lag metav1.Duration `json:"lag,omitempty"`
	// StaleFrom is where a stale-view's reads come from: "created" serves
	// them exactly as of the resource's creation (by its resourceVersion,
	// which the API server keeps until it compacts); "deleted" as of the
	// moment a before step's recreate saw the old object marked for
	// deletion; empty serves them as the proxy recorded them Lag before
	// the injection.
	StaleFrom string `json:"staleFrom,omitempty"`
	// Restart kills the operator at the injection, so that it starts
	// over onto the faulted view (Sieve's stale state: a restart onto a
	// lagging API server).
	Restart bool `json:"restart,omitempty"`
	// Expire makes watch-close end each stream as the API server does a
	// too-old resourceVersion (410 Expired), so clients re-list.
	Expire bool `json:"expire,omitempty"`
}

// RequestMatch picks API requests. Empty fields match anything, except
// namespace, which defaults to the scenario's namespace ("*": any); a
// request across all namespaces (a cluster-wide list or watch) matches
// any namespace, and its watch events are matched object by object.
type RequestMatch struct {
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection.
	Verb string `json:"verb,omitempty"`
	// Resource is the plural resource, such as statefulsets.
	Resource string `json:"resource,omitempty"`
	// Subresource is status, scale, ... ("" matches requests without
	// one; "*" any).
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	// Labels the object concerned must carry.
	Labels map[string]string `json:"labels,omitempty"`
	// Count is how many matching requests the fault acts on (0: all).
	Count int `json:"count,omitempty"`
	// Probability is the chance it acts on each (seeded), 0 meaning 1.
	Probability float64 `json:"probability,omitempty"`
}

// Describe is the fault in a few words: "pod-kill on members", "none".
func (f Fault) Describe() string {
	if f.Target == "" {
		return f.Action
	}
	return f.Action + " on " + f.Target
}

// Action is a step taken before the fault or while it holds. Exactly one
// field is set.
type Action struct {
	// Patch is a JSON merge patch applied to the resource.
	Patch map[string]any `json:"patch,omitempty"`
	// DeletePods deletes a role's pods (and their claims when asked).
	DeletePods *DeletePods `json:"deletePods,omitempty"`
	// Recreate deletes the resource, waits until it is gone (its
	// operator's finalizers done) and creates it again from its manifest:
	// the same name, a new object, and the operator's cleanup of the old
	// one behind it.
	Recreate bool `json:"recreate,omitempty"`
	// Converge waits until the resource's converged expressions hold
	// again (within its convergeWithin): the operator settled on what the
	// actions before asked for.
	Converge bool `json:"converge,omitempty"`
}

// DeletePods deletes the pods of a role.
type DeletePods struct {
	Role string `json:"role"`
	// WithClaims also deletes each pod's PersistentVolumeClaims, so that
	// the pod comes back with an empty volume.
	WithClaims bool `json:"withClaims,omitempty"`
}

// Workload kinds.
const (
	WorkloadEtcdKV  = "etcd-kv"
	WorkloadCommand = "command"
)

// Workload is the load run during the scenario, and its own verdict.
type Workload struct {
	// Kind is etcd-kv (the key-value ledger: no acknowledged write lost, a
	// linearizable history) or command (a command in a pod; exit 0 passes).
	Kind string `json:"kind"`
	// Endpoints are where etcd-kv connects: a role's pods on a port.
	Endpoints *Endpoints `json:"endpoints,omitempty"`
	// Clients and Keys shape etcd-kv (defaults 4 and 8).
	Clients int `json:"clients,omitempty"`
	Keys    int `json:"keys,omitempty"`
	// Command runs in the first pod of a role (kind command).
	Command *Command `json:"command,omitempty"`
	// Baseline is how long etcd-kv runs before the fault is requested
	// (default 10s): the fault-free rate the operations during the fault
	// are compared with.
	Baseline *metav1.Duration `json:"baseline,omitempty"`
}

// Endpoints are a role's pods on a port.
type Endpoints struct {
	Role string `json:"role"`
	Port int32  `json:"port"`
}

// Command is run with exec in a pod of Role.
type Command struct {
	Role      string   `json:"role"`
	Container string   `json:"container,omitempty"`
	Command   []string `json:"command"`
}

// Moments a condition assertion counts from.
const (
	FromRequested = "requested" // the chaos object was created
	FromInjected  = "injected"  // Chaos Mesh reported every target injected
	FromHealed    = "healed"    // every target recovered, the object gone
	// FromRecovered is when, after the heal, every pod the fault targeted
	// was ready again (a killed pod: its replacement of the same name).
	FromRecovered = "recovered"
)

// conditionMoment is the fourth kind of moment, "<Type>=<Status>": when,
// from the request on, the status condition Type first had Status, so that
// an assertion can time a recovery from the loss the operator reported
// (Available=True within 15s after Available=False).
var conditionMoment = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*)=(True|False|Unknown)$`)

// ConditionMoment splits an After of the form "<Type>=<Status>".
func ConditionMoment(after string) (typ, status string, ok bool) {
	m := conditionMoment.FindStringSubmatch(after)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// Assertions judge a run. The workload's data checks and the absence of
// reconcile panics are always judged when the operator's metrics are known.
type Assertions struct {
	Conditions []ConditionAssertion `json:"conditions,omitempty"`
	Metrics    []MetricAssertion    `json:"metrics,omitempty"`
	// OperatorRestarts is how many operator restarts are allowed (default
	// 0; the fault may kill it).
	OperatorRestarts int `json:"operatorRestarts,omitempty"`
	// StableFor is how long the resource's owned objects must keep what
	// the operator writes of them (labels, annotations, owners, spec,
	// data; not the status Kubernetes' controllers keep) once converged
	// (default 10s; 0s turns it off).
	StableFor *metav1.Duration `json:"stableFor,omitempty"`
	// Workload bounds the workload's figures.
	Workload *WorkloadAssertions `json:"workload,omitempty"`
	// Deletion judges the resource's deletion at the end of the scenario.
	Deletion *DeletionAssertions `json:"deletion,omitempty"`
	// SameAsFresh compares what the scenario left, once converged, with
	// a fresh resource created with its final spec (the differential
	// oracle): the status without timestamps and the children's desired
	// state must be the same, whatever path the spec took to get there.
	SameAsFresh bool `json:"sameAsFresh,omitempty"`
	// Follows are fields of the resource's children that carry a spec
	// field's value (the consistency oracle): once converged, after each
	// converge action and at the end, each holds the value the spec
	// field has then. A spec field left unset is not judged.
	Follows []Follow `json:"follows,omitempty"`
	// TruthfulStatus judges, after each converge action and at the end,
	// that the resource's conditions agree with the StatefulSets and
	// Deployments it controls: Available (or Ready) True with neither
	// Progressing nor Degraded True means every one is ready and updated;
	// Available False means some is not.
	TruthfulStatus bool `json:"truthfulStatus,omitempty"`
	// ChangesShow judges that the spec changes the scenario makes show:
	// once they converged, the resource's status or some child differs
	// from what the starting resource converged to, when a changed field
	// is named like something a child holds (a field of that name, or
	// under one: a container's resources passed on). A field newly set
	// to its zero value, one under an object whose switch is off (a
	// boolean of the schema unset or false), one under a status, and a
	// value a child already holds under that name are not judged.
	ChangesShow bool `json:"changesShow,omitempty"`
}

// Follow says that a child's field carries a spec field's value: the
// StatefulSet demo's spec.template.spec.containers[0].image is spec.image.
type Follow struct {
	// Field is the resource's field, from the root (spec.image).
	Field string `json:"field"`
	// Object is the child, Kind/name, in the resource's namespace.
	Object string `json:"object"`
	// Path is the child's field: labels, annotations, spec or data, then
	// its keys and list indexes (spec.template.spec.containers[0].image).
	Path string `json:"path"`
}

// DeletionAssertions judge how the operator lets its resource go.
type DeletionAssertions struct {
	// ChildrenFirst: the operator's finalizer promises that the resource's
	// children (the objects it controls) are deleted before the resource
	// itself goes; a child that outlives it, even for a moment, fails.
	ChildrenFirst bool `json:"childrenFirst,omitempty"`
}

// ConditionAssertion is a condition of the resource that must turn up in
// time (Status within Within of After: requested, injected, healed,
// recovered, or "<Type>=<Status>", the moment a condition first had a
// status), or that
// must never be Never while the fault holds. Type names a status condition; CEL is an expression over
// the object instead.
type ConditionAssertion struct {
	Type string `json:"type,omitempty"`
	CEL  string `json:"cel,omitempty"`
	// Name is what the report calls a CEL assertion (default: the
	// expression itself).
	Name   string          `json:"name,omitempty"`
	Status string          `json:"status,omitempty"`
	Within metav1.Duration `json:"within,omitempty"`
	After  string          `json:"after,omitempty"`
	// Never is a status the condition must not take from injection to heal.
	Never string `json:"never,omitempty"`
}

// MetricAssertion bounds an operator metric, summed over the series that
// carry Labels: its rise over the run (MaxIncrease), or its value after the
// heal (EqualsAfter).
type MetricAssertion struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	MaxIncrease *float64          `json:"maxIncrease,omitempty"`
	EqualsAfter *float64          `json:"equalsAfter,omitempty"`
}

// WorkloadAssertions bound the workload's figures.
type WorkloadAssertions struct {
	// WritesResumeWithin: writes acknowledged again within this long of
	// the fault's request.
	WritesResumeWithin metav1.Duration `json:"writesResumeWithin,omitempty"`
	// MinOperations is the least number of operations checked.
	MinOperations int `json:"minOperations,omitempty"`
	// MinFaultFreeShare is the least share (0–1] of operations acknowledged
	// while the fault holds, against what the fault-free baseline rate
	// gives over the same length: 0.5 asks a partition to cost the workload
	// at most half its throughput.
	MinFaultFreeShare *float64 `json:"minFaultFreeShare,omitempty"`
}
