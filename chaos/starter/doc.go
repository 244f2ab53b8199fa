// Package starter reads an operator project (a kubebuilder or
// operator-sdk layout, or any kustomize folder and a sample custom
// resource) and writes what `gauntlet init` gives a new user: an Operator
// file and a starter set of scenario files that validate at once. It
// learns from the project's rendered manifests, never from its Go: the
// manager's Deployment (namespace, selector, image, metrics flags), the
// CRD of the sample (its plural, whether its status has conditions, an
// integer spec field to change) and the sample itself. What it had to
// guess, it says in Notes.
//
// It must not know any operator: everything comes from the files.
package starter
