// Package crd embeds the generated DatabaseCluster CustomResourceDefinition
// (bases/, written by `make manifests` from the markers on the API types),
// so that the operator can apply the CRD's own schema and CEL rules to
// objects that reach it by another path than the API server's.
package crd

import _ "embed"

// DatabaseClusters is bases/database.gauntlet.dev_databaseclusters.yaml.
//
//go:embed bases/database.gauntlet.dev_databaseclusters.yaml
var DatabaseClusters []byte
