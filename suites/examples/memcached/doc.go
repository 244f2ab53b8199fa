// Package memcached is a second, independent operator adopting Gauntlet's
// simulation tier: a small Memcached operator, modelled on the kubebuilder
// tutorial, with its simulation tests in sim_test.go. It shares nothing with
// the reference operator; it is what another team writes to adopt the
// harness.
//
// Adopting the simulation library (framework/sim) takes four steps:
//
//  1. Write a sim.Target (see newTarget in sim_test.go). Watches mirror the
//     controller's For/Owns and predicates. Setup creates the initial
//     objects and returns the run's hooks: a reconciler factory, the roots
//     a resync enqueues, world steps standing in for the controllers the
//     fake API lacks (here a Deployment simulator and a garbage collector),
//     perturbations (resize, image change, delete), invariants checked
//     after every step (safety and status honesty), Converged (the end
//     state matches the spec) and the kinds to snapshot.
//  2. Call sim.Check from a test: it explores seeded schedules with faults
//     (crashes after k writes, stale reads, API errors, dropped events),
//     runs each one again without faults as a differential oracle, and
//     shrinks the first failure to a minimal set of faults.
//  3. On a failure, the test prints the seed, the minimal faults, the trace
//     and a one-line command that replays exactly that schedule:
//     go test ./suites/examples/memcached -run '^TestSimulation$' -count=1 -args -sim.seed=N -sim.keep=I,J
//  4. Keep the Target next to the operator, so that a change to either one
//     runs the whole simulation again in go test.
//
// The fake API maintains no metadata.generation, so the target's
// perturbations bump it as an API server would (and on deletion, which a
// server also counts as a generation change).
//
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
// +versionName=v1alpha1
package memcached
