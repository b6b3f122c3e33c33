#!/usr/bin/env bash
# HTTP/2 conformance side by side: h2spec 2.2.1 in strict mode (-S, 146 cases) against ramjet and
# against nginx (`http2 on`), each over h2c (prior knowledge, plain port) and over TLS (ALPN h2),
# both in front of the same nginx backend. One command, from anywhere in the repository:
#
#   benches/h2spec/run.sh            # builds target/debug/ramjet and h2spec (tests/tools) if missing
#
# Prints one line per server and transport ("passed/cases") and each failed case; the full h2spec
# output is in target/h2spec-compare/<server>-<transport>.txt. Installs nginx and openssl with
# apt-get when missing. Only 127.0.0.1 is used; every process started is stopped at the end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$repo/target/h2spec-compare"
rm -rf "$out"
mkdir -p "$out"

need=()
command -v nginx >/dev/null || need+=(nginx)
command -v openssl >/dev/null || need+=(openssl)
if ((${#need[@]})); then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
tools="$(bash "$repo/tests/tools/build.sh")"
(cd "$repo" && cargo build -q --bin ramjet)

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
  -keyout "$out/key.pem" -out "$out/cert.pem" 2>/dev/null

# shellcheck source=../nginx-http2.sh
. "$repo/benches/nginx-http2.sh"

# Ports: backend 18090, nginx 18091 (h2c) 18092 (TLS), ramjet 18081 (h2c) 18082 (TLS) 18083 (admin).
cat > "$out/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $out/nginx.pid;
error_log $out/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $out/nginx-body;
  server { listen 127.0.0.1:18090; location / { return 200 "backend\n"; } }
  upstream backend { server 127.0.0.1:18090; keepalive 16; }
  server {
    listen 127.0.0.1:18091$h2listen;
    listen 127.0.0.1:18092 ssl$h2listen;
    $h2on
    ssl_certificate $out/cert.pem;
    ssl_certificate_key $out/key.pem;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c "$out/nginx.conf" -p "$out" &
pids+=($!)

cat > "$out/routes.yaml" <<CONF
backends:
  nginx: { endpoints: ["127.0.0.1:18090"] }
routes:
  - { path: /, backend: nginx }
tls:
  - { hosts: [localhost], certFile: $out/cert.pem, keyFile: $out/key.pem }
CONF
"$repo/target/debug/ramjet" --static-routes "$out/routes.yaml" --workers 1 --http-addr 127.0.0.1:18081 \
  --https-addr 127.0.0.1:18082 --admin-addr 127.0.0.1:18083 >"$out/ramjet.log" 2>&1 &
pids+=($!)
sleep 1

run() { # server transport port [tls flags]
  local server="$1" transport="$2" name="$1-$2" port="$3"; shift 3
  "$tools/h2spec" -S -o 3 -h localhost -p "$port" "$@" -j "$out/$name.xml" >"$out/$name.txt" 2>&1 || true
  local summary
  summary="$(grep -E '^[0-9]+ tests, ' "$out/$name.txt" || echo 'did not finish')"
  printf '%-8s %-5s %s\n' "$server" "$transport" "$summary"
  grep -E '^\s+× ' "$out/$name.txt" | sort -u | sed 's/^ */           /' || true
}
run ramjet h2c 18081
run ramjet tls 18082 -t -k
run nginx h2c 18091
run nginx tls 18092 -t -k
nginx -v
