#!/usr/bin/env bash
# UDP relay benchmark: ramjet's UDP route against nginx `stream` UDP, side by side in front of one
# UDP echo backend (benches/udp/run.py says what is measured). One command:
#
#   benches/udp/run.sh                       # 5 rounds of 10 s each, ~2 minutes
#   benches/udp/run.sh --rounds 3 --duration 5 --flows 256
#   benches/udp/run.sh --no-build            # use the existing target/release/ramjet
#
# It installs what is missing (apt-get: nginx and its stream module, gcc), builds
# target/release/ramjet, and writes target/bench-udp/<timestamp>/results.md. Only 127.0.0.1 is used.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../common.sh
source "$here/../common.sh"

need=()
command -v nginx >/dev/null || need+=(nginx)
[[ -e /usr/lib/nginx/modules/ngx_stream_module.so ]] || need+=(libnginx-mod-stream)
command -v gcc >/dev/null || need+=(gcc)
command -v taskset >/dev/null || need+=(util-linux)
apt_install "${need[@]}"

build_unless_no_build "$@"
run_child python3 "$here/run.py" "${args[@]}"
