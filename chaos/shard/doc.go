// Package shard runs a `gauntlet explore` campaign as shards of an
// Indexed Job on an existing cluster: the bundle a shard's image holds
// (WriteBundle: the gauntlet binary, envtest's binaries, the operator
// built static, the scenario files), the image, the Job and its RBAC.
// Kubernetes schedules the shards, each runs its share of the campaign's
// plan on its own envtest inside its pod and publishes what it found as a
// ConfigMap, and the results merge into one report.
//
// It owns how a campaign is spread over pods. It must not know what a
// shard runs: that is the campaign's, in the gauntlet binary it packs.
package shard
