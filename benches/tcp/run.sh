#!/usr/bin/env bash
# TCP relay benchmark: ramjet's TCP route against HAProxy (mode tcp) and nginx (stream), side by
# side in front of one nginx backend (benches/tcp/run.py says what is measured). One command:
#
#   benches/tcp/run.sh                       # 5 rounds of 10 s per load, ~10 minutes
#   benches/tcp/run.sh --rounds 3 --duration 5
#   benches/tcp/run.sh --no-build            # use the existing target/release/ramjet
#
# It installs what is missing (apt-get: wrk, nginx and its stream module, haproxy, curl), builds
# target/release/ramjet, and writes target/bench-tcp/<timestamp>/results.md. Only 127.0.0.1 is used.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../common.sh
source "$here/../common.sh"

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx)
[[ -e /usr/lib/nginx/modules/ngx_stream_module.so ]] || need+=(libnginx-mod-stream)
command -v haproxy >/dev/null || need+=(haproxy)
command -v curl >/dev/null || need+=(curl)
command -v taskset >/dev/null || need+=(util-linux)
apt_install "${need[@]}"

build_unless_no_build "$@"
run_child python3 "$here/run.py" "${args[@]}"
