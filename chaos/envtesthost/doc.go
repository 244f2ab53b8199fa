// Package envtesthost is what runs in place of a cluster's nodes when a
// scenario runs on envtest: a real kube-apiserver and etcd, the operator
// as a process on this machine (built by its Operator file's
// spec.process.build, started again whenever it exits, as a Deployment's
// pod would be), the API proxy its client goes through, and the
// simulators that play what envtest lacks (the StatefulSet and Deployment
// controllers with their kubelets, the garbage collector, claim
// protection).
//
// It owns the operator's process and the simulated controllers. It must
// not know scenario files beyond spec.process, the resource under test,
// faults or oracles: the engine decides what to apply, which fault to
// hold, and how a run is judged.
package envtesthost
