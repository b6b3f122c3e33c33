#!/usr/bin/env bash
# HTTP/2 to backends, side by side: h2load (h2c, 10 connections × 100 streams) through
#   * ramjet, backend over HTTP/1.1 (`protocol: HTTP`, pooled),
#   * ramjet, backend over HTTP/2 (`protocol: H2C`, one multiplexed connection per endpoint),
#   * nginx `grpc_pass` (its HTTP/2-to-backend path), backend over HTTP/2,
# each proxy with one worker, in front of the same nginx backend (`return 200`, h1 and h2c ports).
# Prints requests/s and the proxy's CPU per request (utime+stime from /proc over the run).
#
#   benches/h2-upstream/run.sh [requests]     # default 200000; builds target/release/ramjet
#   RAMJET=path/to/ramjet benches/h2-upstream/run.sh [requests]   # that binary, no build (A/B runs)
#
# Installs nginx and h2load (nghttp2-client) with apt-get when missing. Only 127.0.0.1 is used;
# every process started is stopped at the end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
requests="${1:-200000}"
out="$repo/target/h2-upstream"
rm -rf "$out"; mkdir -p "$out"

need=()
command -v nginx >/dev/null || need+=(nginx)
command -v h2load >/dev/null || need+=(nghttp2-client)
if ((${#need[@]})); then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
ramjet_bin="${RAMJET:-}"
if [[ -z "$ramjet_bin" ]]; then
  (cd "$repo" && cargo build -q --release --bin ramjet)
  ramjet_bin="$repo/target/release/ramjet"
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# shellcheck source=../nginx-http2.sh
. "$repo/benches/nginx-http2.sh"
# Backend: 18190 HTTP/1.1, 18191 h2c. Proxy under test (nginx): 18192 h2c.
cat > "$out/backend.conf" <<CONF
worker_processes 1;
daemon off;
pid $out/backend.pid;
error_log $out/backend-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:18190; location / { return 200 "ok\n"; } }
  server { listen 127.0.0.1:18191$h2listen; $h2on location / { return 200 "ok\n"; } }
}
CONF
cat > "$out/proxy.conf" <<CONF
worker_processes 1;
daemon off;
pid $out/proxy.pid;
error_log $out/proxy-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream h2backend { server 127.0.0.1:18191; keepalive 16; }
  server { listen 127.0.0.1:18192$h2listen; $h2on location / { grpc_pass grpc://h2backend; } }
}
CONF
nginx -c "$out/backend.conf" -p "$out" & pids+=($!)
nginx -c "$out/proxy.conf" -p "$out" & pids+=($!)
proxy_nginx=$!
cat > "$out/routes.yaml" <<CONF
backends:
  h1: { endpoints: ["127.0.0.1:18190"] }
  h2: { endpoints: ["127.0.0.1:18191"], protocol: H2C }
routes:
  - { host: h1.test, path: /, backend: h1 }
  - { host: h2.test, path: /, backend: h2 }
CONF
"$ramjet_bin" --static-routes "$out/routes.yaml" --workers 1 --http-addr 127.0.0.1:18181 \
  --admin-addr 127.0.0.1:18183 >"$out/ramjet.log" 2>&1 & pids+=($!)
ramjet=$!
sleep 1

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # clock ticks of one process
workers_cpu() { # the nginx worker is the master's child
  local pid="$1" child
  child="$(pgrep -P "$pid" | head -1 || true)"
  echo $(( $(cpu "$pid") + ${child:+$(cpu "$child")} + 0 ))
}
tick=$(getconf CLK_TCK)
run() { # slug label pid url authority
  local slug="$1"; shift
  local label="$1" pid="$2" url="$3" authority="$4"
  h2load -c10 -m100 -n 20000 -H ":authority: $authority" "$url" >/dev/null 2>&1 # warm-up
  local before after
  before="$(workers_cpu "$pid")"
  h2load -c10 -m100 -n "$requests" -H ":authority: $authority" "$url" >"$out/$slug.txt" 2>&1
  after="$(workers_cpu "$pid")"
  local rps
  rps="$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$out/$slug.txt")"
  local us
  us="$(awk -v t=$((after - before)) -v hz="$tick" -v n="$requests" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')"
  printf '%-28s %10s req/s %8s µs CPU/request\n' "$label" "$rps" "$us"
}
run ramjet-h1 "ramjet → HTTP/1.1 backend" "$ramjet" "http://127.0.0.1:18181/" h1.test
run ramjet-h2c "ramjet → h2c backend (H2C)" "$ramjet" "http://127.0.0.1:18181/" h2.test
run nginx-grpc-pass "nginx grpc_pass → h2c" "$proxy_nginx" "http://127.0.0.1:18192/" h2.test
