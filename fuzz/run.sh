#!/usr/bin/env bash
# Builds the fuzz targets and runs each one, one after the other, for a bounded time.
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 30 seconds, every target)
#
# CI runs `fuzz/run.sh 30`; by hand, `fuzz/run.sh 3600` fuzzes each target for an hour. Each target
# starts from its seeds (fuzz/corpus/TARGET, committed) plus what earlier runs on this machine found
# (fuzz/work/TARGET, not committed). A crash, a panic, a timeout or an out-of-memory stops that
# target, leaves the input in fuzz/artifacts/TARGET/ and makes the script exit 1 once every target
# has run; docs/fuzzing.md says how to turn it into a test.
#
# FUZZ_SANITIZER=address adds AddressSanitizer (for the unsafe code of dependencies; slower, and a
# longer build); the default is `none`: ramjet's own crates forbid or confine `unsafe`, and every
# build has overflow checks and debug assertions.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-30}
shift || true
case "$seconds" in '' | *[!0-9]*) echo "usage: fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]" >&2; exit 2 ;; esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request_head response_head chunked static_routes ingress basic_auth proxy_protocol trace_context client_cert_names)
sanitizer=${FUZZ_SANITIZER:-none}

# cargo-fuzz passes a few unstable compiler flags; the project builds with the stable toolchain
# (shared/STYLE.md), which accepts them with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz/run.sh: cargo-fuzz is not installed; installing cargo-fuzz $CARGO_FUZZ_VERSION (cargo install --locked)"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" </dev/null
fi

# libFuzzer's options for each target: its dictionary, and room for a request line longer than
# MAX_URI (8 KiB) in request_head.
options_for() {
  case "$1" in
    request_head) echo -dict=dict/http.dict -max_len=12000 ;;
    response_head) echo -dict=dict/http.dict ;;
    chunked) echo -dict=dict/chunked.dict ;;
    static_routes | ingress) echo -dict=dict/yaml.dict ;;
    proxy_protocol) echo -dict=dict/proxy_protocol.dict -max_len=4200 ;;
  esac
}

started=$(date +%s)
mkdir -p work
echo "fuzz/run.sh: building the fuzz targets (sanitizer: $sanitizer)"
if ! cargo fuzz build --sanitizer "$sanitizer" </dev/null >work/build.log 2>&1; then
  grep -v '^ *Compiling ' work/build.log | tail -n 80
  echo "fuzz/run.sh: the build failed (fuzz/work/build.log)"
  exit 1
fi
echo "fuzz/run.sh: built in $(($(date +%s) - started)) s"

failed=()
for target in "${targets[@]}"; do
  mkdir -p "work/$target" "corpus/$target"
  log="work/$target.log"
  echo "fuzz/run.sh: $target for $seconds s"
  status=0
  cargo fuzz run --sanitizer "$sanitizer" "$target" "work/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 $(options_for "$target") -print_final_stats=1 </dev/null >"$log" 2>&1 || status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | awk '{ s += $1 } END { print s + 0 }')
  if [ "$status" -eq 0 ]; then
    echo "fuzz/run.sh: $target: $runs runs, no failure; corpus $(ls "work/$target" | wc -l) inputs"
  else
    failed+=("$target")
    echo "fuzz/run.sh: $target FAILED (exit $status); the end of its log ($log):"
    tail -n 60 "$log"
  fi
done

echo "fuzz/run.sh: ${#targets[@]} targets in $(($(date +%s) - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz/run.sh: failures in ${failed[*]}; the inputs are in fuzz/artifacts/ (docs/fuzzing.md: turn each into a test)"
fi
echo "fuzz: $((${#targets[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
