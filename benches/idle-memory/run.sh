#!/usr/bin/env bash
# Memory of idle keep-alive connections, ramjet vs nginx (one worker each): see run.py.
#   benches/idle-memory/run.sh [--connections 5000] [--rounds 6] [--no-build]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
args=()
build=1
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    *) args+=("$a") ;;
  esac
done
if ! command -v nginx >/dev/null; then
  sudo=""; if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends nginx >/dev/null
fi
if ((build)); then (cd "$repo" && cargo build --release --bin ramjet); fi
ulimit -n "$(ulimit -Hn)"  # 2 x connections + slack: the client and the server each hold one end
cd "$repo" && exec python3 "$here/run.py" "${args[@]}"
