// Package sim is Gauntlet's simulation tier: it drives any controller-runtime
// reconciler through seeded, perturbed schedules and checks invariants after
// every step, in the spirit of Sieve (OSDI '22) and Acto (SOSP '23), whose
// bug studies found most operator bugs in three places:
//
//   - intermediate state: the reconciler crashes between two writes;
//   - stale state: it decides on a view that lags the API (an informer behind);
//   - unobserved state: it never hears of a change (lost or filtered events).
//
// A Schedule is a pure function of its seed: a list of actions (reconcile,
// world step, perturbation, resync) some of which carry faults (crash after
// the k-th write, stale reads, API errors, a dropped event). Run executes it
// on the controller-runtime fake client (crashes and API errors through
// framework.Faults, the same fault layer the unit tier uses), checks the target's invariants
// after every action, then stops the faults and checks liveness: the system
// settles within a bound and converges to its spec. RunDifferential also runs
// the same inputs without faults and diffs the end states, as Sieve does;
// consecutive seeds share an input script (Config.FaultVariants) so that
// RunSeeds runs each script's fault-free twin once. A
// failing schedule is shrunk to a minimal set of faults, printed with its
// trace and a one-line replay command. A target may Note what a run reached
// (a failure while a change was in flight, say); a Tally adds the notes up
// over the seeds run, so a test can show its coverage from the
// simulator's own records.
//
// Nothing here knows about a particular operator. A Target supplies the
// scheme, the watches (what wakes the controller), a fresh reconciler on
// demand, the world's simulators, the perturbations it can suffer and its
// invariants; see suites/simulation for the reference operator and
// suites/examples for a second, independent one.
package sim
