//go:build tools

// Package tools pins the commands build.sh compiles, so `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/fullstorydev/grpcurl/cmd/grpcurl"
	_ "github.com/summerwind/h2spec/cmd/h2spec"
)
