#!/usr/bin/env bash
# Memory of idle keep-alive connections, ramjet vs nginx (one worker each): the `idle` section of
# benches/proxy/bench.py, run alone, with one ramjet whose buffers are released after 1 s (the default)
# and one whose release is pushed out of reach (1 h).
#   benches/idle-memory/run.sh [--connections 5000] [--rounds 3] [--settle 15] [--after-close 12]
#                              [--release-after 1s,1h] [--no-build] [any other bench.py option]
# Results: target/bench-proxy/<timestamp>/results.md (section "Idle keep-alive client connections").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
args=(--sections idle --idle-release-after 1s,1h)
while (($#)); do
  case "$1" in
    --connections) args+=(--idle-connections "$2"); shift 2 ;;
    --rounds) args+=(--idle-rounds "$2"); shift 2 ;;
    --settle) args+=(--idle-settle "$2"); shift 2 ;;
    --after-close) args+=(--idle-after-close "$2"); shift 2 ;;
    --release-after) args+=(--idle-release-after "$2"); shift 2 ;;
    --binary) args+=(--ramjet "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
ulimit -n "$(ulimit -Hn)"  # the client ends of every connection are held by the harness
exec "$here/../proxy/run.sh" "${args[@]}"
