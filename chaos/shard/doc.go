// Package shard runs campaigns as shards of an Indexed Job on an
// existing cluster: the bundle a shard's image holds (WritePrograms: the
// gauntlet binary and envtest's binaries; WriteOperator: an operator
// built static with its scenario files, once per source tree a benchmark
// needs), the image, the Job and its RBAC. Kubernetes schedules the
// shards; each runs its share (of one `gauntlet explore` campaign's plan,
// or one campaign of `gauntlet bench bugs --job`) on its own envtest
// inside its pod and publishes what it found as a ConfigMap; RunJob
// gathers them, and Run merges an explore campaign's into one report.
//
// It owns how a campaign is spread over pods. It must not know what a
// shard runs: that is the campaign's, in the gauntlet binary it packs.
package shard
