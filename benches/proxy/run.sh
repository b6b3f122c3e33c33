#!/usr/bin/env bash
# Side-by-side proxy benchmark: ramjet vs nginx vs HAProxy in front of one nginx backend, plus
# TLS and configuration churn under load. One command, from anywhere in the repository:
#
#   benches/proxy/run.sh                 # everything, ~15 minutes with the defaults
#   benches/proxy/run.sh --quick         # 3 rounds of 5 s, ~5 minutes
#   benches/proxy/run.sh --help          # every option of the harness (bench.py)
#
#   benches/proxy/run.sh --sections h2  # HTTP/2 clients (h2load) through ramjet and nginx
#   benches/proxy/run.sh --sections mirror        # a down and a slow mirror against no mirror
#   benches/proxy/run.sh --sections instructions  # callgrind: instructions per request, plain vs canary
#   benches/proxy/run.sh --sections gateway       # docs/gateway-api.md's migration example as Ingresses
#                                                 # and as an HTTPRoute: callgrind and wrk, per request kind
#   benches/proxy/run.sh --no-build --sections gateway --rounds 4 --duration 5 --insn-rounds 4 --insn-requests 10000  # ~9 min
#   benches/proxy/run.sh --sections close   # a new connection per request (Connection: close), ramjet vs nginx
#   benches/proxy/run.sh --sections idle    # 5,000 idle keep-alive connections (--idle-connections): RSS per
#                                           # connection and after they close, ramjet vs nginx (--idle-rounds 3)
#   benches/proxy/run.sh --sections pins    # p99 under 20 pins/releases a second (--pin-rate) with 10,000 routes
#                                           # (--churn-routes) against the same run quiet
#   benches/proxy/run.sh --no-build --sections close,idle,pins --rounds 3 --duration 5   # ~3 min
#   --no-build: use the existing target/release/ramjet (or pass --ramjet PATH)
#
# It installs what is missing (apt-get: wrk, nginx, haproxy, openssl, gcc, python3, h2load; for the
# instructions and gateway sections, a valgrind that can count io_uring, via benches/budget/valgrind.py), builds
# target/release/ramjet, and runs bench.py. Results: target/bench-proxy/<timestamp>/results.md.
# Only 127.0.0.1 is used; every process started is stopped at the end, also on Ctrl-C.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../common.sh
source "$here/../common.sh"

args=()
build=1
for a in "$@"; do
  case "$a" in
    --quick) args+=(--rounds 3 --duration 5) ;;
    --no-build) build=0 ;;
    *) args+=("$a") ;;
  esac
done

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx)
command -v haproxy >/dev/null || need+=(haproxy)
command -v openssl >/dev/null || need+=(openssl)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v python3 >/dev/null || need+=(python3)
command -v taskset >/dev/null || need+=(util-linux)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v sha256sum >/dev/null || need+=(coreutils)
if [[ " $* " == *" --profile "* ]] && ! command -v perf >/dev/null; then need+=(linux-perf); fi
# valgrind for the instructions and gateway sections: bench.py fetches one that can count io_uring.
apt_install "${need[@]}"

if ((build)); then
  (cd "$repo" && cargo build --release --bin ramjet)
fi

run_child python3 "$here/bench.py" "${args[@]}"
