// Package framework is Gauntlet's reusable test harness for controller-runtime
// operators. Nothing in it knows about a particular operator: the reference
// DatabaseCluster operator uses it exactly as another operator's tests would.
//
// The pieces, usable on the fake client and on a real API server alike:
//
//   - NewFakeClient: a controller-runtime fake client configured like a
//     server (status subresources, server-side apply with managed fields).
//   - HaveCondition: a Gomega matcher for metav1.Conditions with a readable
//     failure message listing every condition the object has.
//   - StatefulSetSimulator: advances StatefulSet and Pod status the way the
//     StatefulSet controller and kubelets would (create, ready, scale, roll),
//     for backends that run no controllers (the fake client, envtest);
//     DeploymentSimulator, JobSimulator, GarbageCollector, ClaimProtection
//     and VolumeBinder play the other controllers envtest lacks (a
//     provisioner whose volumes bind and grow, for VolumeBinder).
//   - WriteLog: records every write a client makes, to assert that a
//     converged pass writes nothing.
//   - Faults: fails matching calls (by verb, kind, object, the Nth or the
//     first few) with an API error (ErrConflict, ErrInternal, ...) or a
//     crash, on the fake client, an envtest client or the simulation's
//     reconciler alike.
//   - Intercept: the one hook shape (before a call, after it) that Faults,
//     WriteLog and the simulation's clients are built on, as
//     controller-runtime interceptor functions.
//   - Driver: ReconcileUntilStable, a hot-loop detector that fails with a
//     diff of what kept changing, and ExpectIdempotent.
//   - MetricValue: reads a counter, gauge or histogram count from a registry.
package framework
