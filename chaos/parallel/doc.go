// Package parallel runs the scenarios of a set side by side on one
// cluster, each in its own namespace, and keeps the verdicts a run of one
// after another would give.
//
// It owns the order: the scenarios that can share the cluster run a few at
// a time, then those that cannot (scenario.Scenario.Alone says which and
// why) run one at a time, and a scenario that failed beside others runs
// again alone, its verdict that second attempt's (what it shares, a busy
// machine or a controller's metrics, may be what failed it). It records
// what ran beside what in each result.
//
// It must not know how a scenario runs or is judged: the caller's run
// function does that, and its result's verdict is all this package reads.
package parallel
