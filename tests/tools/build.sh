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

mkdir -p "$target/go-tools"
exec 9>"$target/go-tools/.lock"
flock 9
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  for candidate in /usr/local/go/bin /usr/lib/go/bin; do
    if [ -x "$candidate/go" ]; then PATH="$PATH:$candidate"; break; fi
  done
fi
if ! command -v go >/dev/null 2>&1; then
  echo "tests/tools/build.sh: Go is not installed (need go >= 1.24 on PATH or in /usr/local/go/bin)" >&2
  exit 127
fi

echo "tests/tools/build.sh: building h2spec and grpcurl into $out (first time on this machine)" >&2
start=$(date +%s)
tmp="$target/go-tools/.build-$stamp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
cd "$here"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="-mod=readonly" CGO_ENABLED=0
go build -trimpath -ldflags "-s -w" -o "$tmp/" \
  github.com/summerwind/h2spec/cmd/h2spec \
  github.com/fullstorydev/grpcurl/cmd/grpcurl
echo "$stamp" > "$tmp/.stamp"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "tests/tools/build.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$out"
