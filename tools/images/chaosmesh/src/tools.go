//go:build tools

// Package tools pins the Chaos Mesh commands this module builds.
package tools

import (
	_ "github.com/chaos-mesh/chaos-mesh/cmd/chaos-controller-manager"
	_ "github.com/chaos-mesh/chaos-mesh/cmd/chaos-daemon"
)
