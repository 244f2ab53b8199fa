//go:build tools

// Package tools pins the local-path-provisioner command this module builds.
package tools

import _ "github.com/rancher/local-path-provisioner"
