# Shared by the benchmark scripts (source it): installing what is missing and running the Python
# harness as a child that Ctrl-C stops.

# apt_install PACKAGE...: installs the packages with apt-get (sudo when not root). RUNLEVEL=1
# keeps packaged servers (nginx, haproxy) from starting their system services.
apt_install() {
  (($#)) || return 0
  echo "$(basename "$0"): installing $*" >&2
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# run_child COMMAND...: runs COMMAND and waits for it; on exit, Ctrl-C or SIGTERM the child is
# stopped too (it stops everything it started itself).
run_child() {
  child=""
  trap 'stop_child' EXIT
  trap 'stop_child; exit 130' INT TERM
  "$@" &
  child=$!
  wait "$child"
}

stop_child() {
  if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
}

# build_unless_no_build ARG...: builds target/release/ramjet unless the arguments hold --no-build,
# and leaves the other arguments in the array `args` (for the harness).
build_unless_no_build() {
  local build=1 a
  args=()
  for a in "$@"; do
    case "$a" in
      --no-build) build=0 ;;
      *) args+=("$a") ;;
    esac
  done
  if ((build)); then
    (cd "$repo" && cargo build --release --bin ramjet)
  fi
}
