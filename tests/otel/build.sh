#!/usr/bin/env bash
# Builds the OpenTelemetry Collector test distribution (main.go: the OTLP receiver, the batch
# processor, the otlphttp and debug exporters) from the pinned versions in go.mod/go.sum beside
# this script, once per machine, into target/otel/<stamp>/otelcol (the stamp hashes the pins, the
# source and the recipe, so a change to any rebuilds). A second run is a no-op. Prints the
# directory holding the binary on stdout.
#
# The tests call this themselves (tests/support/otel_collector.rs) when the binary is missing.
# Needs Go and the Go module proxy; builds from the committed go.sum, never rewriting it. The
# collector needs Go 1.26 (go.mod's go line): an older Go fetches that toolchain from the module
# proxy itself (GOTOOLCHAIN=auto), so the machines that build the API server with Go 1.24 build
# this too.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"

# How the binary is built; bump it when the go build line below changes.
recipe="go build -trimpath -ldflags '-s -w', CGO_ENABLED=0 (1)"
stamp="$( (cat "$here/go.mod" "$here/go.sum" "$here/main.go"; echo "$recipe") | sha256sum | cut -c1-16)"
out="$target/otel/$stamp"

cd "$here"
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
# shellcheck source=../go-build.sh
. "$here/../go-build.sh"
go_build_cached tests/otel/build.sh "$target/otel" "$out" "$stamp" "-s -w" .
