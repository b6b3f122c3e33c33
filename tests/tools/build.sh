#!/usr/bin/env bash
# Builds the Go test peers — h2spec and grpcurl — from the pinned versions in go.mod/go.sum beside
# this script, once per machine, into target/go-tools/<stamp>/ (the stamp hashes the pins and the
# recipe, so a change to either rebuilds). A second run is a no-op. Prints the directory holding
# the binaries on stdout.
#
# The tests call this themselves (tests/support/go_tools.rs) when the binaries are missing.
# Needs Go (>= 1.24) and the Go module proxy; builds from the committed go.sum, never rewriting it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"

# How the binaries are built; bump it when the go build line below changes.
recipe="go build -trimpath -ldflags '-s -w', CGO_ENABLED=0 (1)"
stamp="$( (cat "$here/go.mod" "$here/go.sum"; echo "$recipe") | sha256sum | cut -c1-16)"
out="$target/go-tools/$stamp"

cd "$here"
# shellcheck source=../go-build.sh
. "$here/../go-build.sh"
go_build_cached tests/tools/build.sh "$target/go-tools" "$out" "$stamp" "-s -w" \
  github.com/summerwind/h2spec/cmd/h2spec \
  github.com/fullstorydev/grpcurl/cmd/grpcurl
