package scenario

// Operator is how to deploy the operator under test (kind: Operator). A
// directory of scenarios holds one, shared by its scenarios.
type Operator struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   Metadata     `json:"metadata"`
	Spec       OperatorSpec `json:"spec"`
}

// OperatorSpec deploys the operator and says how to find and scrape it.
type OperatorSpec struct {
	// Variables are ${NAME} substitutions in this spec and the manifests,
	// with their defaults; the environment and --set override them.
	Variables map[string]string `json:"variables,omitempty"`
	// Kustomize is a kustomization directory, relative to this file.
	Kustomize string `json:"kustomize,omitempty"`
	// Manifests are YAML files applied in order, relative to this file
	// (instead of Kustomize).
	Manifests []string `json:"manifests,omitempty"`
	// Exclude leaves out of the rendered manifests the objects each entry
	// matches (by kind, and name and namespace when given): a
	// ServiceMonitor for a Prometheus operator the cluster lacks, in a
	// file that holds the operator's Deployment too. Each must match some
	// object.
	Exclude []ObjectMatch `json:"exclude,omitempty"`
	// Images are loaded into a kind cluster before the deploy; Image
	// replaces the manifests' image named there.
	Images []Image `json:"images,omitempty"`
	// Args are appended to the arguments of the container that runs the
	// first image with replaces (a flag to try, a bug variant to catch).
	Args []string `json:"args,omitempty"`
	// Env sets environment variables on the same container: a variable
	// its manifests set (by value or valueFrom) takes this value, one they
	// lack is added. For manifests that pin what a run must change, such
	// as WATCH_NAMESPACE set to the operator's own namespace while every
	// scenario makes its own.
	Env map[string]string `json:"env,omitempty"`
	// Namespace is where the operator's pods run.
	Namespace string `json:"namespace"`
	// Selector selects the operator's pods in Namespace.
	Selector map[string]string `json:"selector"`
	// Metrics is where the operator serves Prometheus metrics.
	Metrics *Metrics `json:"metrics,omitempty"`
	// PodSecurity is the Pod Security Standard level enforced in every
	// scenario's namespace: restricted (the default), baseline or
	// privileged, as the system the operator runs requires; a scenario
	// may set its own.
	PodSecurity string `json:"podSecurity,omitempty"`
	// Process runs the operator as a process on the host instead of its
	// Deployment, for gauntlet run --envtest (no cluster, no images): the
	// rest of its manifests (CRDs, RBAC, ServiceAccount) are applied as
	// they are, and it talks to the API server through the API proxy with
	// its ServiceAccount's token.
	Process *Process `json:"process,omitempty"`
}

// ObjectMatch matches objects of the operator's manifests.
type ObjectMatch struct {
	// Kind is required (ServiceMonitor); APIVersion narrows it
	// (monitoring.coreos.com/v1).
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion,omitempty"`
	// Name and Namespace, when given, match only that object.
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Matches says whether an object of that apiVersion, kind, namespace and
// name is one m matches.
func (m ObjectMatch) Matches(apiVersion, kind, namespace, name string) bool {
	return m.Kind == kind && (m.APIVersion == "" || m.APIVersion == apiVersion) &&
		(m.Name == "" || m.Name == name) && (m.Namespace == "" || m.Namespace == namespace)
}

// Process is how to start the operator on the host.
type Process struct {
	// Command is the program and its arguments. A program path with a
	// slash is relative to this file. The engine sets three variables:
	// ${GAUNTLET_METRICS_ADDRESS} and ${GAUNTLET_PROBE_ADDRESS}, free
	// loopback addresses for the metrics and health endpoints, and
	// ${GAUNTLET_PROCESS_BINARY}, an absolute path for Build to write.
	Command []string `json:"command"`
	// Build, when set, runs first in this file's folder, for example
	// [go, build, -C, ../.., -o, "${GAUNTLET_PROCESS_BINARY}", ./cmd].
	Build []string `json:"build,omitempty"`
	// Env adds environment variables to the process's.
	Env map[string]string `json:"env,omitempty"`
}

// Pod Security Standard levels (spec.podSecurity).
const (
	PodSecurityRestricted = "restricted"
	PodSecurityBaseline   = "baseline"
	PodSecurityPrivileged = "privileged"
)

// PodSecurityLevels are the levels, strictest first.
var PodSecurityLevels = []string{PodSecurityRestricted, PodSecurityBaseline, PodSecurityPrivileged}

// Engine-set variables, usable in an Operator file's process.
const (
	VarMetricsAddress = "GAUNTLET_METRICS_ADDRESS"
	VarProbeAddress   = "GAUNTLET_PROBE_ADDRESS"
	VarProcessBinary  = "GAUNTLET_PROCESS_BINARY"
)

// EngineVariables are the variables the engine sets itself.
var EngineVariables = []string{VarMetricsAddress, VarProbeAddress, VarProcessBinary}

// Image is an image to load, and the name in the manifests it replaces.
type Image struct {
	// Name is the image to load (variables allowed, e.g. ${OPERATOR_IMAGE}).
	Name string `json:"name"`
	// Replaces is the image name in the manifests to swap for Name.
	Replaces string `json:"replaces,omitempty"`
}

// Metrics locates the operator's metrics endpoint on its pods.
type Metrics struct {
	Port int32  `json:"port"`
	Path string `json:"path,omitempty"` // default /metrics
	// Controller is the controller-runtime controller whose reconcile
	// counters the report draws.
	Controller string `json:"controller,omitempty"`
	// Secure says the endpoint is HTTPS behind authentication and
	// authorization, as kubebuilder scaffolds it (--metrics-secure): the
	// harness scrapes it with the token of a ServiceAccount of its own,
	// gauntlet-metrics-reader in the operator's namespace, which it
	// allows to get the path; the serving certificate is not verified.
	Secure bool `json:"secure,omitempty"`
}
