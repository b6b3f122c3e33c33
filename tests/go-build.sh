# Sourced by tests/k8s/build.sh and tests/tools/build.sh: builds Go test tools once per machine.
#
#   go_build_cached NAME CACHE OUT STAMP LDFLAGS PACKAGE...
#
# Builds PACKAGEs (relative to the calling script's module directory, the current directory) into
# OUT, a directory under CACHE, unless OUT already holds a build with this STAMP (a hash of the
# pins and the recipe). Holds CACHE/.lock meanwhile, so concurrent test binaries build it once;
# builds into a temporary directory and renames it, so a failed build leaves nothing behind. Prints
# OUT on stdout; NAME prefixes the messages on stderr.
go_build_cached() {
  local name=$1 cache=$2 out=$3 stamp=$4 ldflags=$5
  shift 5
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
    echo "$out"
    return 0
  fi

  if ! command -v go >/dev/null 2>&1; then
    for candidate in /usr/local/go/bin /usr/lib/go/bin; do
      if [ -x "$candidate/go" ]; then PATH="$PATH:$candidate"; break; fi
    done
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "$name: Go is not installed (need go >= 1.24 on PATH or in /usr/local/go/bin)" >&2
    exit 127
  fi

  echo "$name: building $* into $out (first time on this machine)" >&2
  local start tmp
  start=$(date +%s)
  tmp="$cache/.build-$stamp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # shellcheck disable=SC2064 # expand now: $tmp is local
  trap "rm -rf '$tmp'" EXIT
  GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="-mod=readonly" CGO_ENABLED=0 \
    go build -trimpath -ldflags "$ldflags" -o "$tmp/" "$@"
  echo "$stamp" > "$tmp/.stamp"
  rm -rf "$out"
  mv "$tmp" "$out"
  trap - EXIT
  echo "$name: built in $(( $(date +%s) - start ))s" >&2
  echo "$out"
}
