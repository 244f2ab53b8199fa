// Package preflight checks a set of scenario files against what they
// name before any cluster or API server exists: the operator's rendered
// manifests (an image replacement that no container runs, a namespace and
// selector that select no pod template) and the custom resource's CRD
// among them (fields its schema lacks, CEL that does not compile or give a
// bool), each mistake at its file, line and field. It owns the in-process
// reading of a CRD's structural schema for those checks; it must not
// know how a scenario runs or is judged (chaos/engine).
package preflight
