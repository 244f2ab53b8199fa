//go:build tools

// Package tools pins the CoreDNS command this module builds.
package tools

import _ "github.com/coredns/coredns"
