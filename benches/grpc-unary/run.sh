#!/usr/bin/env bash
# gRPC unary calls through a proxy, side by side: ghz (10 connections, 100 calls in flight,
# grpc.health.v1.Health/Check) through
#   * ramjet, backend `protocol: GRPC` (one multiplexed h2c connection per endpoint per worker),
#   * nginx `grpc_pass` (upstream keepalive),
# each proxy with one worker, in front of the same grpc-go backend (server/, health + reflection).
# Prints calls/s, p50 and p99 latency, and the proxy's CPU per call (utime+stime from /proc).
#
#   benches/grpc-unary/run.sh [calls]     # default 100000; builds target/release/ramjet
#
# Builds ghz and the backend from the pins in go.mod/go.sum beside this script (once, cached under
# target/grpc-unary-tools/), installs nginx with apt-get when missing. Only 127.0.0.1 is used;
# every process started is stopped at the end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
calls="${1:-100000}"
target="${CARGO_TARGET_DIR:-$repo/target}"
out="$target/grpc-unary"
rm -rf "$out"; mkdir -p "$out"

command -v nginx >/dev/null || {
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends nginx >/dev/null
}
stamp="$( (cat "$here/go.mod" "$here/go.sum" "$here/server/main.go"; echo "go build -s -w (1)") | sha256sum | cut -c1-16)"
# shellcheck source=../../tests/go-build.sh
tools="$(cd "$here" && . "$repo/tests/go-build.sh" && go_build_cached benches/grpc-unary \
  "$target/grpc-unary-tools" "$target/grpc-unary-tools/$stamp" "$stamp" "-s -w" ./server github.com/bojand/ghz/cmd/ghz)"
(cd "$repo" && cargo build -q --release --bin ramjet)

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# The backend: 18291 (h2c). nginx under test: 18292 (h2c). ramjet under test: 18281.
GOMAXPROCS=1 "$tools/server" 127.0.0.1:18291 >"$out/backend.log" 2>&1 & pids+=($!)
# shellcheck source=../nginx-http2.sh
. "$repo/benches/nginx-http2.sh"
cat > "$out/proxy.conf" <<CONF
worker_processes 1;
daemon off;
pid $out/proxy.pid;
error_log $out/proxy-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream grpcbackend { server 127.0.0.1:18291; keepalive 16; }
  server { listen 127.0.0.1:18292$h2listen; $h2on location / { grpc_pass grpc://grpcbackend; } }
}
CONF
nginx -c "$out/proxy.conf" -p "$out" & pids+=($!)
proxy_nginx=$!
cat > "$out/routes.yaml" <<CONF
backends:
  grpc: { endpoints: ["127.0.0.1:18291"], protocol: GRPC }
routes:
  - { path: /, backend: grpc }
CONF
"$repo/target/release/ramjet" --static-routes "$out/routes.yaml" --workers 1 --http-addr 127.0.0.1:18281 \
  --admin-addr 127.0.0.1:18283 >"$out/ramjet.log" 2>&1 & pids+=($!)
ramjet=$!
sleep 1

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # clock ticks of one process
proxy_cpu() { # the nginx worker is the master's child
  local pid="$1" child
  child="$(pgrep -P "$pid" | head -1 || true)"
  echo $(( $(cpu "$pid") + ${child:+$(cpu "$child")} + 0 ))
}
tick=$(getconf CLK_TCK)
ghz() { # address calls output
  "$tools/ghz" --insecure --call grpc.health.v1.Health/Check --connections 10 -c 100 \
    -n "$2" --format json --output "$3" "$1" >/dev/null 2>&1
}
run() { # slug label pid address
  local slug="$1" label="$2" pid="$3" address="$4"
  ghz "$address" 10000 "$out/$slug-warmup.json"
  local before after
  before="$(proxy_cpu "$pid")"
  ghz "$address" "$calls" "$out/$slug.json"
  after="$(proxy_cpu "$pid")"
  python3 - "$out/$slug.json" "$label" "$((after - before))" "$tick" "$calls" <<'PY'
import json, sys
report, label, ticks, hz, calls = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
p = {d["percentage"]: d["latency"] / 1e6 for d in report["latencyDistribution"] or []}
ok = report["statusCodeDistribution"].get("OK", 0)
print(f"{label:<30} {report['rps']:>9.0f} calls/s  p50 {p.get(50, 0):6.2f} ms  p99 {p.get(99, 0):6.2f} ms"
      f"  {ticks / hz * 1e6 / calls:6.1f} µs CPU/call  ({ok}/{calls} OK)")
PY
}
run ramjet "ramjet → gRPC backend (GRPC)" "$ramjet" 127.0.0.1:18281
run nginx "nginx grpc_pass" "$proxy_nginx" 127.0.0.1:18292
