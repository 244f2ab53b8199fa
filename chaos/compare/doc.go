// Package compare reads what a run left and judges two such end states
// against each other.
//
// An end state (State) is a resource's status without timestamps and its
// namespace's children as the operator wants them (labels, annotations,
// owners, spec and data, without what the API server or a random source
// fills in), with the run's namespace and the resource's UID written as
// placeholders, so that runs in different namespaces compare. Twin judges a
// run under a fault against its fault-free twin (end state, writes,
// deletes); Fresh judges a run against a fresh resource made with the spec
// it ended with. What two fault-free runs already differ in is Noise, and
// never a finding.
//
// List reads the kinds an operator's children are looked for in
// (ChildResources), once for each check that needs them: the end state,
// what is left after a deletion, which children the resource owns or
// controls, and the watches of a deletion's order.
//
// The package knows the API server through a dynamic client and reports
// through chaos/report; it knows nothing of how a run is driven, faulted or
// chosen (chaos/engine, chaos/explore).
package compare
