// Package viewfault makes a scenario's view faults out of the API proxy
// in front of the operator (framework/apiproxy): a fault's proxy rule
// (what it matches, what it does), the experiment that arms the rule for
// the hold and takes it off at the heal, the kill right after a matching
// write, the end of a hold once the operator has gone quiet, and the
// rewiring of the operator's pods so that they reach the proxy instead of
// the API server.
//
// It knows no run and no cluster: the engine hands it the proxy, how to
// kill the operator and name its pods, the fault, the run's namespace and
// the resource versions a stale view starts from. How the proxy is
// started and reached (this machine, or the API relay) is the engine's.
package viewfault
