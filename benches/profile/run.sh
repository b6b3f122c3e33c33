#!/usr/bin/env bash
# Where does each server spend its CPU for one traffic shape? ramjet and nginx side by side, one
# worker each, on 127.0.0.1, behind the same nginx `return 200` backend and with the same routes and
# configuration as the proxy harness (benches/proxy/bench.py, whose functions profile.py imports).
#
# benches/proxy/run.sh says how many µs of CPU a request costs each server; this says where they go:
#   * perf record -e cpu-clock -g -p PID during a wrk run (--duration, default 10 s): the top symbols
#     by self time, also as µs per request, the kernel / user split, by DSO, and for ramjet by thread;
#     CPU per request from /proc (user and system) as the cross-check;
#   * strace -c -f -p PID during a second, shorter wrk run (--strace-duration, default 5 s): system
#     calls per request by name. Ramjet (--io-driver io-uring, as in the harness) does its socket I/O
#     through io_uring, so it shows io_uring_enter instead of reads and writes; the io_uring
#     operations it submits are counted per request too (tracepoint io_uring:io_uring_submit_req).
# The cpu-clock software event needs no hardware counters (VMs have none); perf and strace need root.
#
#   benches/profile/run.sh --ramjet target/release/ramjet --shape close    # Connection: close, plain HTTP
#   benches/profile/run.sh --ramjet target/release/ramjet --shape https    # HTTPS keep-alive
#   benches/profile/run.sh --ramjet target/release/ramjet --shape keepalive  # plain HTTP keep-alive
#   benches/profile/run.sh --ramjet target/release/ramjet --shape https --duration 5 --keep --out report.txt
#   benches/profile/run.sh --servers nginx --shape close                   # nginx alone (no ramjet binary)
#   benches/profile/run.sh --help                                          # every option
#
# It does not build ramjet (cargo build --release --bin ramjet). It installs what is missing
# (apt-get: wrk, nginx, openssl, gcc, perf, strace). The report goes to stdout (and --out FILE); raw
# outputs (perf.data, perf report and strace texts, configs, logs) go to a temp dir whose path is
# printed, removed at the end unless --keep. Every process started is stopped at the end, also on Ctrl-C.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../common.sh
source "$here/../common.sh"

if [[ " $* " != *" --help "* && " $* " != *" -h "* ]]; then
  need=()
  command -v wrk >/dev/null || need+=(wrk)
  command -v nginx >/dev/null || need+=(nginx)
  command -v openssl >/dev/null || need+=(openssl)
  command -v gcc >/dev/null || need+=(gcc libc6-dev)
  command -v python3 >/dev/null || need+=(python3)
  command -v perf >/dev/null || need+=(linux-perf)
  command -v strace >/dev/null || need+=(strace)
  apt_install "${need[@]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "run.sh: not root: perf -p and strace -p may be refused (perf_event_paranoid, ptrace_scope)" >&2
  fi
fi

run_child python3 "$here/profile.py" "$@"
