//go:build tools

// Package tools pins ghz, the gRPC load generator run.sh builds beside the backend.
package tools

import _ "github.com/bojand/ghz/cmd/ghz"
