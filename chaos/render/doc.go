// Package render turns what the scenario files say into what runs: the
// ${NAME} variables resolved (--set, then the environment, then the
// file's default), an Operator file's manifests or kustomization rendered
// and a scenario's manifest read, both with their variables expanded, and
// the operator's process built by its spec.process.build.
//
// It owns how a file's words become objects and programs. It must not
// know clusters, runs or faults: the engine applies what it renders, and
// the shard bundle packs it.
package render
