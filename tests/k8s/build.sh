#!/usr/bin/env bash
# Builds the test control plane — kube-apiserver, kubectl and etcd — from the pinned versions in
# go.mod/go.sum beside this script, once per machine, into target/k8s-bin/<kubernetes version>/.
# A second run with the same pins is a no-op. Prints the directory holding the binaries on stdout.
#
# The cluster tests call this themselves (tests/support/control_plane.rs) when the binaries are
# missing; docs/local-control-plane.md shows how to run ramjet against the same control plane.
# Needs Go (>= 1.24) and the Go module proxy; builds from the committed go.sum, never rewriting it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"

version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$here/go.mod")"
if [ -z "$version" ]; then
  echo "tests/k8s/build.sh: no k8s.io/kubernetes requirement in $here/go.mod" >&2
  exit 1
fi
out="$target/k8s-bin/$version"
# How the binaries are built; bump it when the go build line below changes.
recipe="go build -trimpath, version ldflags, CGO_ENABLED=0 (1)"
# The stamp names exactly what was built, so a change to the pins, the etcd main or the recipe rebuilds.
stamp="$( (cat "$here/go.mod" "$here/go.sum" "$here/etcd/main.go"; echo "$recipe") | sha256sum | cut -c1-16)"

minor="${version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
cd "$here"
# shellcheck source=../go-build.sh
. "$here/../go-build.sh"
go_build_cached tests/k8s/build.sh "$target/k8s-bin" "$out" "$stamp" "$ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kubectl \
  ./etcd
