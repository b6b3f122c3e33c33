#!/usr/bin/env python3
"""Side-by-side proxy benchmark: ramjet, nginx and HAProxy in front of one shared backend.

Run it through `benches/proxy/run.sh` (which installs missing tools and builds ramjet), or directly:
`python3 benches/proxy/bench.py --help`. Everything listens on 127.0.0.1 only, every process started
here is stopped on the way out (also on Ctrl-C or an error), and every loop is bounded.

Sections (http, tls, handshake and churn by default):
  http       plain HTTP/1.1 keep-alive: backend direct (the ceiling), ramjet, nginx, HAProxy
  tls        the same over HTTPS (keep-alive): ramjet, nginx, HAProxy
  handshake  one request per connection over HTTPS, every connection a full TLS handshake
  resume     one request per connection over HTTPS, sessions resumed (wrk's default behaviour)
  churn      ramjet with 10,000 routes, 10 publishes/s through the admin API, against the same
             run without churn; nginx with 1,000 vhosts (10,000 locations) and `nginx -s reload`
             once a second, against the same run without reloads
  accesslog  plain HTTP/1.1 keep-alive with the access log on (JSON lines to a file) and off, ramjet
             against nginx (nginx: a JSON `log_format` with the same fields, `buffer=64k flush=1s`)
             (not in the default set: `--sections accesslog`)
  canary     plain HTTP/1.1 keep-alive to one ramjet, interleaved: a plain route against a route whose
             canary splits it 50/50 (both sides the same backend), so the difference is the weighted
             pick and the per-backend series (not in the default set: `--sections canary`)
  h2         HTTP/2 clients (h2load -c10 -m100: 100 streams on each of 10 connections), h2c by prior
             knowledge and h2 over TLS (ALPN), ramjet against nginx (`listen ... http2`), both
             proxying over HTTP/1.1 to the same backend; p50 and p99 from h2load's per-request
             log (--log-file); then the memory an idle HTTP/2 connection holds in each (not in the
             default set: `--sections h2`)
  mirror     plain HTTP/1.1 keep-alive to one ramjet, interleaved: a route without a mirror against the
             same route mirrored (100 %) to a mirror that refuses connections and to one that answers
             only after 5 s; with ramjet's mirror counters (not in the default set: `--sections mirror`)
  instructions
             instructions per request (valgrind callgrind, user space) of ramjet's worker thread on the
             plain and the canary route, from two runs with exactly N1 and N2 requests (h2load --h1 -n):
             (Ir(N2) - Ir(N1)) / (N2 - N1) (not in the default set: `--sections instructions`)
  gateway    docs/gateway-api.md's migration example served from --manifests twice, as Ingresses with
             ingress-nginx annotations (canary by header and weight, mirror-target, permanent-redirect,
             rewrite-target) and as the equivalent HTTPRoute, per request kind (weighted+mirrored,
             header-matched+mirrored, rewritten, redirected): instructions per request of the worker
             (callgrind, as `instructions`, with the functions that differ most) and, with wrk, req/s and
             CPU per request side by side in alternating rounds; HTTPRoute / Ingress for each (not in the
             default set: `--sections gateway`; --gw-kinds, --gw-parts)
  close      a new connection per request: the http section's proxies, routes and backend, every request
             `Connection: close` (wrk -H), ramjet against nginx, interleaved; CPU per request, req/s, p99,
             and who holds the TIME_WAIT (not in the default set: `--sections close`)
  idle       memory of idle keep-alive client connections: --idle-connections (5,000) to a fresh ramjet
             (one per --idle-release-after) and a fresh nginx at once, one request each, RSS per
             connection, then RSS after closing them against the start; --idle-rounds (3) (not in the
             default set: `--sections idle`; benches/idle-memory/run.sh runs it alone)
  pins       ramjet with --churn-routes routes, wrk against one route: p99 of a quiet run against a run
             during which the harness pins and releases (POST / DELETE /admin/rollback) at --pin-rate (20)
             per second; interleaved; CPU per pin (not in the default set: `--sections pins`)
"""

import argparse
import atexit
import datetime
import glob
import http.client
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The valgrind command of the instructions sections (set in main when they run).
VALGRIND = ["valgrind"]

DOMAIN = "bench.local"
ROUTES_PER_HOST = 10


def add_relay_args(p, repo):
    """The options the Layer-4 relay benchmarks (benches/tcp, benches/udp) share."""
    p.add_argument("--ramjet", default=f"{repo}/target/release/ramjet")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=int, default=10, help="seconds per run")
    p.add_argument("--proxy-cpus", default="0")
    p.add_argument("--load-cpus", default="1")
    p.add_argument("--stream-module", default="/usr/lib/nginx/modules/ngx_stream_module.so")


def write_results(out, lines, results):
    """The results table (`lines`) into out/results.md and on stdout, the raw runs into results.json."""
    text = "\n".join(lines) + "\n"
    with open(f"{out}/results.md", "w") as f:
        f.write(text)
    with open(f"{out}/results.json", "w") as f:
        json.dump(results, f, indent=1)
    print(text)
    log(f"results in {out}/results.md")


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# processes


class Procs:
    """Every process this harness starts, so that all of them are stopped at the end."""

    def __init__(self):
        self.live = []  # (name, Popen, stop_signal)

    def start(self, name, argv, env=None, stop_signal=signal.SIGTERM, stderr_path=None, cwd=None):
        err = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=cwd)
        if stderr_path:
            err.close()
        self.live.append((name, p, stop_signal))
        return p

    def stop(self, p, timeout=10.0):
        for i, (name, q, sig) in enumerate(self.live):
            if q is p:
                del self.live[i]
                _stop_one(name, q, sig, timeout)
                return

    def stop_all(self):
        while self.live:
            name, q, sig = self.live.pop()
            _stop_one(name, q, sig, 10.0)


def _stop_one(name, p, sig, timeout):
    if p.poll() is not None:
        return
    try:
        p.send_signal(sig)
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"{name} (pid {p.pid}) did not stop within {timeout:.0f}s: SIGKILL")
        p.kill()
        p.wait(timeout=5)
    except ProcessLookupError:
        pass


PROCS = Procs()


def _on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def wait_port(port, proc, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT left by a previous run is fine
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def machine_ticks():
    """(busy, steal) clock ticks of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return v[0] + v[1] + v[2] + v[5] + v[6], v[7] if len(v) > 7 else 0


def tcp_ext():
    """The TcpExt counters of the whole machine (/proc/net/netstat), by name."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return {k: int(v) for k, v in zip(names.split()[1:], values.split()[1:])}
    return {}


def listen_overflows():
    """TcpExt ListenOverflows of the whole machine (/proc/net/netstat): SYNs dropped because a listen
    queue was full; each one costs its client a SYN retransmission (1 s on the first retry)."""
    return tcp_ext().get("ListenOverflows", 0)


def tcp_sockets():
    """(TCP sockets in use, sockets in TIME_WAIT) on the whole machine, from /proc/net/sockstat."""
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                v = line.split()[1:]
                row = dict(zip(v[::2], v[1::2]))
                return int(row.get("inuse", 0)), int(row.get("tw", 0))
    return 0, 0


def resched_ipis():
    """Rescheduling interrupts (RES in /proc/interrupts) summed over the CPUs."""
    with open("/proc/interrupts") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "RES:":
                return sum(int(x) for x in parts[1:] if x.isdigit())
    return 0


def own_children_ticks():
    """CPU ticks of this harness's reaped children (wrk, reload commands)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * CLK_TCK


def own_ticks():
    """CPU ticks of this harness itself (its admin requests under churn and pins) and of its reaped
    children (wrk, reload commands): work of the benchmark, not foreign load."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * CLK_TCK + own_children_ticks()


def time_wait_sides(port):
    """Sockets in TIME_WAIT on 127.0.0.1 whose local port is `port` (the server's end of a connection to
    it) and whose remote port is `port` (the client's end), from /proc/net/tcp."""
    server = client = 0
    want = f"{port:04X}"
    with open("/proc/net/tcp") as f:
        next(f, None)
        for line in f:
            cols = line.split(None, 4)
            if len(cols) < 4 or cols[3] != "06":  # 06: TIME_WAIT
                continue
            if cols[1].endswith(":" + want):
                server += 1
            elif cols[2].endswith(":" + want):
                client += 1
    return server, client


def tree_rss_kb(root):
    """Resident memory of `root` and its descendants, in KiB (VmRSS summed)."""
    ppid, rss = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^PPid:\s+(\d+)", text, re.M)
        r = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
        ppid[int(d)] = int(m.group(1)) if m else 0
        rss[int(d)] = int(r.group(1)) if r else 0
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(p for p, pp in ppid.items() if pp == pid)
    return total


def tree_cpu_ticks(root):
    """utime+stime of `root` (all its threads) and of its live descendants, plus what its
    reaped children used (cutime+cstime): nginx workers replaced by a reload still count."""
    stats = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        rest = raw[raw.rindex(")") + 2:].split()
        # fields after "pid (comm) ": state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
        stats[int(d)] = (int(rest[1]), int(rest[11]), int(rest[12]), int(rest[13]), int(rest[14]))
    if root not in stats:
        raise RuntimeError(f"process {root} is gone")
    children = {}
    for pid, st in stats.items():
        children.setdefault(st[0], []).append(pid)
    total = stats[root][3] + stats[root][4]
    todo = [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1] + stats[pid][2]
        todo.extend(children.get(pid, []))
    return total


def threads_cpu_ticks(pid, prefix):
    """utime+stime of the threads of `pid` whose name starts with `prefix` (ramjet's workers)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith(prefix):
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        rest = raw[raw.rindex(")") + 2:].split()
        total += int(rest[11]) + int(rest[12])
    return total


def threads_run_ns(pid):
    """Time on a CPU of each thread of `pid`, summed by thread name, in ns (/proc/<pid>/task/*/schedstat:
    the scheduler's own account, not rounded to clock ticks as utime and stime are)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out[name] = out.get(name, 0) + ns
    return out


# --------------------------------------------------------------------------------------------
# configuration files


def host(i):
    return f"h{i}.{DOMAIN}"


def write_ramjet_routes(path, hosts, backend_port, cert, key):
    lines = ["# generated by benches/proxy/bench.py", "backends:"]
    for i in range(hosts):
        lines.append(f"  b{i}: {{ endpoints: [\"127.0.0.1:{backend_port}\"] }}")
    lines.append("routes:")
    for i in range(hosts):
        for j in range(ROUTES_PER_HOST):
            lines.append(f"  - {{ host: {host(i)}, path: /p{j}, pathType: Prefix, backend: b{i} }}")
    lines += [
        "tls:",
        f"  - hosts: [\"*.{DOMAIN}\"]",
        f"    certFile: {cert}",
        f"    keyFile: {key}",
        "    sslRedirect: false",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_canary_routes(path, hosts, target_i, backend_port, cert, key):
    """The harness's routes plus a second name for the same backend (`canary`), a host
    (canary.DOMAIN) whose /p7 route splits 50/50 between b<target_i> and it, and a plain /p7 route to
    b<target_i> on direct.DOMAIN, a host name as long as the canary's (parsing, validating and hashing
    the host cost per byte)."""
    write_ramjet_routes(path, hosts, backend_port, cert, key)
    with open(path) as f:
        text = f.read()
    text = text.replace("routes:\n", f"  canary: {{ endpoints: [\"127.0.0.1:{backend_port}\"] }}\n"
                        f"routes:\n  - {{ host: canary.{DOMAIN}, path: /p7, pathType: Prefix, backend: b{target_i}, "
                        f"canary: {{ backend: canary, weight: 50 }} }}\n"
                        f"  - {{ host: direct.{DOMAIN}, path: /p7, pathType: Prefix, backend: b{target_i} }}\n", 1)
    with open(path, "w") as f:
        f.write(text)


# The gateway section: the migration example of docs/gateway-api.md, as an Ingress set with
# ingress-nginx annotations and as one HTTPRoute, each in its own --manifests directory, for the same
# host and the same three Services (stable, beta, shadow: three server blocks of one nginx).
GW_HOST = "shop.example.com"

# request kinds: (path, extra request headers, expected status class, what the check looks for)
GW_KINDS = {
    # rule `/`: weights 90/10 (stable/beta), mirrored to shadow
    "weighted": ("/p7/bench", (), "2xx", {"uri": "/p7/bench"}),
    # the same path with x-beta: yes: the header rule, to beta, mirrored to shadow
    "header": ("/p7/bench", ("x-beta: yes",), "2xx", {"uri": "/p7/bench", "served_by": "beta"}),
    # /api/... rewritten to /v2/... at stable
    "rewrite": ("/api/p7/bench", (), "2xx", {"uri": "/v2/p7/bench", "served_by": "stable"}),
    # /old answers 301 to /new
    "redirect": ("/old", (), "3xx", {"status": 301, "location": "http://shop.example.com/new"}),
}

GW_INGRESS = r"""# generated by benches/proxy/bench.py: docs/gateway-api.md's migration example, the Ingress side
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/mirror-target: http://shadow.shop.svc/$request_uri
spec:
  ingressClassName: ramjet
  rules:
    - host: shop.example.com
      http:
        paths:
          - { path: /, pathType: Prefix, backend: { service: { name: stable, port: { number: 80 } } } }
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop-canary
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/canary: "true"
    nginx.ingress.kubernetes.io/canary-by-header: x-beta
    nginx.ingress.kubernetes.io/canary-by-header-value: "yes"
    nginx.ingress.kubernetes.io/canary-weight: "10"
spec:
  ingressClassName: ramjet
  rules:
    - host: shop.example.com
      http:
        paths:
          - { path: /, pathType: Prefix, backend: { service: { name: beta, port: { number: 80 } } } }
---
# the redirect and the rewrite, which need Ingresses of their own in this dialect
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop-old
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/permanent-redirect: http://shop.example.com/new
spec:
  ingressClassName: ramjet
  rules:
    - host: shop.example.com
      http:
        paths:
          - { path: /old, pathType: Prefix, backend: { service: { name: stable, port: { number: 80 } } } }
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop-api
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/rewrite-target: /v2/$2
spec:
  ingressClassName: ramjet
  rules:
    - host: shop.example.com
      http:
        paths:
          - path: /api(/|$)(.*)
            pathType: ImplementationSpecific
            backend: { service: { name: stable, port: { number: 80 } } }
"""

GW_HTTPROUTE = r"""# generated by benches/proxy/bench.py: docs/gateway-api.md's migration example, the HTTPRoute side
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: ramjet }
spec: { controllerName: ramjet.dev/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners:
    - { name: http, port: 80, protocol: HTTP, allowedRoutes: { namespaces: { from: All } } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: shop, namespace: shop }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [shop.example.com]
  rules:
    - matches: [{ path: { type: PathPrefix, value: / }, headers: [{ name: x-beta, value: "yes" }] }]
      backendRefs: [{ name: beta, port: 80 }]         # canary-by-header
      filters:                                        # the primary's mirror-target covers canary requests too
        - type: RequestMirror
          requestMirror: { backendRef: { name: shadow, port: 80 } }
    - matches: [{ path: { type: PathPrefix, value: / } }]
      backendRefs:                                    # canary-weight: 10
        - { name: stable, port: 80, weight: 90 }
        - { name: beta, port: 80, weight: 10 }
      filters:
        - type: RequestMirror                         # mirror-target
          requestMirror: { backendRef: { name: shadow, port: 80 } }
    - matches: [{ path: { type: PathPrefix, value: /old } }]
      filters:
        - type: RequestRedirect                       # permanent-redirect
          requestRedirect: { statusCode: 301, path: { type: ReplacePrefixMatch, replacePrefixMatch: /new } }
    - matches: [{ path: { type: PathPrefix, value: /api } }]
      filters:
        - type: URLRewrite                            # rewrite-target: /v2/$2 with path /api(/|$)(.*)
          urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v2 } }
        # (the example's RequestHeaderModifier is left out: the Ingress side cannot say it)
      backendRefs: [{ name: stable, port: 80 }]
"""


def gw_services(ports):
    """The IngressClass, and the Services stable, beta and shadow (namespace shop, port 80) with an
    EndpointSlice each to a server block of the gateway section's nginx."""
    docs = ["# generated by benches/proxy/bench.py\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n"
            "metadata: { name: ramjet }\nspec: { controller: ramjet.dev/ingress-controller }\n"]
    for name in ("stable", "beta", "shadow"):
        docs.append(
            f"apiVersion: v1\nkind: Service\nmetadata: {{ name: {name}, namespace: shop }}\n"
            f"spec: {{ ports: [{{ name: http, port: 80 }}] }}\n---\n"
            f"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{ name: {name}-1, namespace: shop, "
            f"labels: {{ kubernetes.io/service-name: {name} }} }}\naddressType: IPv4\n"
            f"ports: [{{ name: http, port: {ports['gw-' + name]} }}]\n"
            f"endpoints: [{{ addresses: [\"127.0.0.1\"], conditions: {{ ready: true }} }}]\n")
    return "---\n".join(docs)


def write_gw_manifests(d, ports):
    """Two --manifests directories, {d}/gw-ingress and {d}/gw-httproute: the same Services, and the
    Ingress set or the HTTPRoute (with its GatewayClass and Gateway)."""
    dirs = {}
    for side, text in (("ingress", GW_INGRESS), ("httproute", GW_HTTPROUTE)):
        path = f"{d}/gw-{side}"
        os.makedirs(path, exist_ok=True)
        with open(f"{path}/services.yaml", "w") as f:
            f.write(gw_services(ports))
        with open(f"{path}/{side}.yaml", "w") as f:
            f.write(text)
        dirs[side] = path
    return dirs


def write_gw_backend_conf(d, ports):
    """One nginx, three server blocks (stable, beta, shadow) that answer 200 "ok" at once; stable
    and beta say who they are and which path they were asked for, so the checks can see the split,
    the header match and the rewrite."""
    path = f"{d}/gw-backends.conf"
    with open(path, "w") as f:
        f.write(nginx_head(d, "gw-backends"))
        f.write("http {\n  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n")
        f.write(nginx_temp_paths(d, "gw-backends"))
        for name in ("stable", "beta", "shadow"):
            f.write(f"  server {{\n    listen 127.0.0.1:{ports['gw-' + name]};\n    location / {{ "
                    f"add_header x-served-by {name}; add_header x-uri $request_uri; return 200 \"ok\"; }}\n  }}\n")
        f.write("}\n")
    return path


def gw_check(name, port, kind):
    """One request of `kind` (GW_KINDS) through a ramjet of the gateway section; raises unless it was
    answered as the configuration says."""
    path, headers, _, want = GW_KINDS[kind]
    extra = "".join(f"{h}\r\n" for h in headers)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {GW_HOST}\r\n{extra}Connection: close\r\n\r\n".encode())
        data = b""
        while len(data) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split(" ", 2)[1]) if lines[0].count(" ") >= 1 else 0
    fields = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        fields[k.strip().lower()] = v.strip()
    ok = (status == want.get("status", 200)
          and (status != 200 or body == b"ok")
          and ("uri" not in want or fields.get("x-uri") == want["uri"])
          and ("served_by" not in want or fields.get("x-served-by") == want["served_by"])
          and ("location" not in want or fields.get("location") == want["location"]))
    if not ok:
        raise RuntimeError(f"{name}: {kind} (GET {path}) answered {head[:300]!r} {body[:80]!r}; expected {want}")
    return {"status": status, "served_by": fields.get("x-served-by"), "location": fields.get("location"),
            "connection": fields.get("connection")}


def nginx_head(d, name, error_level="warn", worker_connections=8192):
    user = "user root;\n" if os.geteuid() == 0 else ""
    return (
        f"# generated by benches/proxy/bench.py\n{user}worker_processes 1;\ndaemon off;\n"
        f"pid {d}/{name}.pid;\nerror_log {d}/{name}.error.log {error_level};\n"
        f"worker_rlimit_nofile {max(65536, 2 * worker_connections)};\n"
        f"events {{ worker_connections {worker_connections}; }}\n"
    )


def write_nginx_stream(d, port, backend_port, module, listen="", server=""):
    """An nginx `stream` relay from 127.0.0.1:port to backend_port (the TCP and UDP benchmarks'
    peer); `listen`: more of the listen directive (` udp`), `server`: more directives."""
    path = f"{d}/stream.conf"
    with open(path, "w") as f:
        f.write(f"load_module {module};\n")
        f.write(nginx_head(d, "stream"))
        f.write(f"stream {{\n  server {{\n    listen 127.0.0.1:{port}{listen};\n"
                f"    proxy_pass 127.0.0.1:{backend_port};\n{server}  }}\n}}\n")
    return path


def nginx_temp_paths(d, name):
    t = f"{d}/{name}-tmp"
    os.makedirs(t, exist_ok=True)
    return (
        f"  client_body_temp_path {t}/body; proxy_temp_path {t}/proxy; fastcgi_temp_path {t}/fcgi;\n"
        f"  uwsgi_temp_path {t}/uwsgi; scgi_temp_path {t}/scgi;\n"
    )


def write_backend_conf(d, port, backlog=None):
    path = f"{d}/backend.conf"
    with open(path, "w") as f:
        f.write(nginx_head(d, "backend"))
        f.write("http {\n  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n")
        f.write(nginx_temp_paths(d, "backend"))
        bl = f" backlog={backlog}" if backlog else ""  # nginx's own default is 511
        f.write(f"  server {{\n    listen 127.0.0.1:{port} default_server{bl};\n")
        f.write('    location / { return 200 "ok"; }\n  }\n}\n')
    return path


# The fields of ramjet's JSON access-log record, as an nginx log_format.
NGINX_JSON_LOG = (
    "  log_format ramjetjson escape=json '{\"time\":\"$time_iso8601\",\"client\":\"$remote_addr:$remote_port\","
    "\"method\":\"$request_method\",\"host\":\"$host\",\"path\":\"$request_uri\",\"protocol\":\"$server_protocol\","
    "\"user_agent\":\"$http_user_agent\",\"request_id\":\"$request_id\",\"tls\":\"$https\",\"status\":$status,"
    "\"bytes_in\":$request_length,\"bytes_out\":$bytes_sent,\"duration_ms\":$request_time,"
    "\"upstream_addr\":\"$upstream_addr\",\"upstream_connect_ms\":\"$upstream_connect_time\","
    "\"upstream_header_ms\":\"$upstream_header_time\",\"route\":\"$server_name\",\"backend\":\"$proxy_host\"}';\n"
)


def write_nginx_proxy_conf(d, name, hosts, http_port, https_port, backend_port, cert, key, error_level="warn",
                           http2=False, access_log=None, keepalive=64):
    path = f"{d}/{name}.conf"
    with open(path, "w") as f:
        f.write(nginx_head(d, name, error_level))
        if access_log:
            f.write("http {\n" + NGINX_JSON_LOG + f"  access_log {access_log} ramjetjson buffer=64k flush=1s;\n"
                    "  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n")
        else:
            f.write("http {\n  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n")
        f.write(nginx_temp_paths(d, name))
        f.write("  server_names_hash_max_size 16384;\n  server_names_hash_bucket_size 128;\n")
        # What an ingress sends upstream; ramjet adds the same set (x-forwarded-*, x-real-ip).
        f.write(
            "  proxy_http_version 1.1;\n"
            '  proxy_set_header Connection "";\n'
            "  proxy_set_header Host $host;\n"
            "  proxy_set_header X-Forwarded-For $remote_addr;\n"
            "  proxy_set_header X-Real-IP $remote_addr;\n"
            "  proxy_set_header X-Forwarded-Proto $scheme;\n"
            "  proxy_set_header X-Forwarded-Port $server_port;\n"
            "  proxy_set_header X-Forwarded-Host $host;\n"
        )
        if https_port:
            f.write(f"  ssl_certificate {cert};\n  ssl_certificate_key {key};\n  ssl_protocols TLSv1.2 TLSv1.3;\n")
        for i in range(hosts):
            f.write(
                f"  upstream b{i} {{ server 127.0.0.1:{backend_port}; keepalive {keepalive}; "
                "keepalive_requests 1000000; keepalive_timeout 60s; }\n"
            )
        # nginx 1.22 names HTTP/2 on the listen line (h2c by prior knowledge on a plain port)
        h2 = " http2" if http2 else ""
        ssl_default = f" listen 127.0.0.1:{https_port} ssl{h2} default_server;" if https_port else ""
        ssl_listen = f"    listen 127.0.0.1:{https_port} ssl{h2};\n" if https_port else ""
        f.write(f"  server {{ listen 127.0.0.1:{http_port}{h2} default_server;{ssl_default} return 404; }}\n")
        for i in range(hosts):
            f.write(f"  server {{\n    listen 127.0.0.1:{http_port}{h2};\n{ssl_listen}    server_name {host(i)};\n")
            for j in range(ROUTES_PER_HOST):
                f.write(f"    location /p{j}/ {{ proxy_pass http://b{i}; }}\n")
            f.write("  }\n")
        f.write("}\n")
    return path


def write_haproxy_conf(d, hosts, http_port, https_port, backend_port, combined_pem):
    map_path = f"{d}/haproxy-routes.map"
    with open(map_path, "w") as f:
        for i in range(hosts):
            for j in range(ROUTES_PER_HOST):
                f.write(f"{host(i)}/p{j} b{i}\n")
    path = f"{d}/haproxy.cfg"
    with open(path, "w") as f:
        f.write(
            "# generated by benches/proxy/bench.py; no `log` line: HAProxy logs nothing\n"
            "global\n  nbthread 1\n  maxconn 8192\n  tune.ssl.default-dh-param 2048\n"
            "defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n"
            "  timeout http-keep-alive 60s\n  http-reuse always\n"
            "frontend fe\n"
            f"  bind 127.0.0.1:{http_port}\n"
            f"  bind 127.0.0.1:{https_port} ssl crt {combined_pem} ssl-min-ver TLSv1.2\n"
            # the same headers ramjet and the nginx configuration send upstream
            "  http-request set-header X-Forwarded-For %[src]\n"
            "  http-request set-header X-Real-IP %[src]\n"
            "  http-request set-header X-Forwarded-Proto https if { ssl_fc }\n"
            "  http-request set-header X-Forwarded-Proto http if !{ ssl_fc }\n"
            "  http-request set-header X-Forwarded-Port %[dst_port]\n"
            "  http-request set-header X-Forwarded-Host %[req.hdr(host)]\n"
            # routing: host (lower case, no port) + first path segment, one tree lookup in the map
            "  http-request set-var(txn.seg) path,field(2,/)\n"
            "  http-request set-var(txn.route) req.hdr(host),field(1,:),lower,concat(/,txn.seg)\n"
            f"  use_backend %[var(txn.route),map({map_path},b_none)]\n"
            "backend b_none\n  http-request return status 404\n"
        )
        for i in range(hosts):
            f.write(f"backend b{i}\n  server s1 127.0.0.1:{backend_port}\n")
    return path


def make_cert(d):
    cert, key = f"{d}/bench.crt", f"{d}/bench.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key, "-out", cert, "-days", "7", "-subj", f"/CN=*.{DOMAIN}",
         "-addext", f"subjectAltName=DNS:*.{DOMAIN},DNS:{DOMAIN}"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    combined = f"{d}/bench-combined.pem"
    with open(combined, "w") as out:
        for p in (cert, key):
            with open(p) as f:
                out.write(f.read())
    return cert, key, combined


def build_shim(d):
    out = f"{d}/tls_client_shim.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", out, f"{HERE}/tls_client_shim.c", "-ldl"], check=True)
    return out


# --------------------------------------------------------------------------------------------
# servers


class Server:
    def __init__(self, name, proc, ports, worker_prefix=None):
        self.name, self.proc, self.ports = name, proc, ports
        self.worker_prefix = worker_prefix

    def cpu(self):
        return tree_cpu_ticks(self.proc.pid)

    def rss_mb(self):
        return tree_rss_kb(self.proc.pid) / 1024

    def worker_cpu(self):
        return threads_cpu_ticks(self.proc.pid, self.worker_prefix) if self.worker_prefix else 0


def taskset(cpus):
    return ["taskset", "-c", cpus] if cpus else []


def start_nginx(name, conf, d, port, cpus):
    p = PROCS.start(name, taskset(cpus) + ["nginx", "-p", d, "-c", conf], stop_signal=signal.SIGTERM,
                    stderr_path=f"{d}/{name}.stderr")
    wait_port(port, p, name, timeout=120)
    return p


def start_ramjet(args, name, routes, d, http_port, https_port, admin_port, log_level="warn", cpus=None,
                 binary=None, extra=(), wrapper=(), io_driver="io-uring", source="--static-routes"):
    """`routes` is a --static-routes file, or with source="--manifests" a directory of manifests."""
    env = dict(os.environ, RAMJET_LOG=log_level)
    argv = taskset(cpus) + list(wrapper) + [
        binary or args.ramjet, source, routes, "--workers", "1", "--io-driver", io_driver,
        "--http-addr", f"127.0.0.1:{http_port}", "--https-addr", f"127.0.0.1:{https_port}",
        "--admin-addr", f"127.0.0.1:{admin_port}", "--drain-timeout", "1s", *extra,
    ]
    p = PROCS.start(name, argv, env=env, stderr_path=f"{d}/{name}.stderr")
    wait_port(admin_port, p, name, timeout=300 if wrapper else 120)
    deadline = time.monotonic() + (300 if wrapper else 60)
    while True:  # ready once the first generation is published
        try:
            if admin_request(admin_port, "GET", "/readyz")[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or p.poll() is not None:
            raise RuntimeError(f"{name} never became ready; see {d}/{name}.stderr")
        time.sleep(0.05)
    wait_port(http_port, p, name)
    return p


def admin_request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def check_route(name, port, host_header, path, tls=False):
    """One request through the proxy before measuring: the route must answer 200 "ok"."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        conn = raw
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            conn = ctx.wrap_socket(raw, server_hostname=host_header)  # SNI: the route's host
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else head[:40]
    if status != b"200" or body != b"ok":
        raise RuntimeError(f"{name}: GET {path} Host: {host_header} over {'https' if tls else 'http'} answered "
                           f"{head[:200]!r} {body[:80]!r}; expected 200 'ok'")


def tls_params(port, sni, path):
    """What a handshake negotiates (openssl s_client), and whether a second connection resumes the
    first one's session (Python's ssl, after one request so that TLS 1.3 tickets have arrived)."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", sni, "-brief"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    out = r.stdout + r.stderr
    proto = re.search(r"Protocol version: (\S+)", out)
    suite = re.search(r"Ciphersuite: (\S+)", out)
    group = re.search(r"(?:Negotiated TLS1.3 group|Server Temp Key): ([^,\n]+)", out)
    desc = " ".join(m.group(1).strip() for m in (proto, suite, group) if m) or "unknown"
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    session, reused = None, None
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=sni, session=session) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n".encode())
                while s.recv(4096):
                    pass
                reused = s.session_reused
                session = s.session
    return f"{desc}; resumes sessions: {'yes' if reused else 'no'}"


# --------------------------------------------------------------------------------------------
# load


def run_wrk(args, url, host_header, extra_headers=(), env_extra=None, duration=None, label=""):
    duration = duration or args.duration
    argv = taskset(args.load_cpus) + [
        "wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{duration}s", "--latency",
        "-s", f"{HERE}/report.lua", "-H", f"Host: {host_header}",
    ]
    for h in extra_headers:
        argv += ["-H", h]
    argv.append(url)
    env = dict(os.environ, **(env_extra or {}))
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=duration + 60)
    m = re.search(r"^WRKJSON (\{.*\})$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed for {label} ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return json.loads(m.group(1))


def measure(args, server, backend, url, host_header, extra_headers=(), env_extra=None, label="",
            during=None):
    """One wrk run; CPU of the proxy (and of the backend) read from /proc around it."""
    c0, w0, b0 = server.cpu(), server.worker_cpu(), backend.cpu()
    (m0, st0), k0, i0 = machine_ticks(), own_ticks(), resched_ipis()
    t0 = time.monotonic()
    side = during() if during else None
    try:
        w = run_wrk(args, url, host_header, extra_headers, env_extra, label=label)
    finally:
        extra = side.finish() if side else {}
        if side:
            time.sleep(args.settle)  # let reloads in flight finish before the next run starts
    c1, w1, b1 = server.cpu(), server.worker_cpu(), backend.cpu()
    (m1, st1), k1, i1 = machine_ticks(), own_ticks(), resched_ipis()
    n = w["requests"]
    secs = w["duration_us"] / 1e6
    res = {
        "requests": n,
        "rps": n / secs if secs else 0.0,
        "p50_us": w["p50"], "p99_us": w["p99"], "p999_us": w["p999"], "max_us": w["max"],
        "errors": w["connect"] + w["read"] + w["write"] + w["timeout"] + w["status"],
        "errors_detail": {k: w[k] for k in ("connect", "read", "write", "timeout", "status")},
        "cpu_s": (c1 - c0) / CLK_TCK,
        "backend_cpu_s": (b1 - b0) / CLK_TCK,
        "wall_s": time.monotonic() - t0,
        "rss_mb": server.rss_mb(),
    }
    # CPUs' worth of work by processes outside the benchmark during the run (other users, builds):
    # the machine's busy time minus the proxy, the backend, wrk and this harness. A noisy run shows here.
    wall = res["wall_s"] * CLK_TCK
    proxy_ticks = (c1 - c0) if server is not backend else 0
    res["foreign_cpus"] = max(0.0, ((m1 - m0) - proxy_ticks - (b1 - b0) - (k1 - k0)) / wall) if wall else 0.0
    res["steal_cpus"] = (st1 - st0) / wall if wall else 0.0
    # reschedule IPIs per request, machine-wide: io_uring task-work notifications show up here
    res["resched_ipis_per_req"] = (i1 - i0) / n if n else float("nan")
    res["cpu_us_per_req"] = res["cpu_s"] * 1e6 / n if n else float("nan")
    if server.worker_prefix:  # ramjet: the data-plane worker threads alone (the rest is the control thread)
        res["worker_cpu_us_per_req"] = (w1 - w0) / CLK_TCK * 1e6 / n if n else float("nan")
    res["backend_cpu_us_per_req"] = res["backend_cpu_s"] * 1e6 / n if n else float("nan")
    res.update(extra)
    errs = res["errors"]
    log(f"  {label:<28} {res['rps']:>9.0f} req/s  p50 {res['p50_us']/1000:6.2f} ms  p99 "
        f"{res['p99_us']/1000:6.2f} ms  errors {errs:<5}  cpu {res['cpu_us_per_req']:6.2f} us/req"
        + (f" (worker {res['worker_cpu_us_per_req']:.2f})" if "worker_cpu_us_per_req" in res else "")
        + f"  foreign load {res['foreign_cpus']:.2f} CPUs  IPIs/req {res['resched_ipis_per_req']:.3f}"
        + (f"  {extra}" if extra else ""))
    return res


def percentile(sorted_vals, q):
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, -(-len(sorted_vals) * q // 100) - 1))
    return float(sorted_vals[int(k)])


def h2load_log_latencies(path):
    """h2load --log-file rows (start µs since the epoch, status, µs until the end of the response; one
    row per request of the measured phase): the completed requests' durations, ascending."""
    vals = []
    with open(path) as f:
        for line in f:
            cols = line.split("\t")
            if len(cols) >= 3 and cols[1].strip() != "-1":
                vals.append(int(cols[2]))
    vals.sort()
    return vals


def run_h2load(args, url, sni_host, label="", log_path=None):
    """One h2load run (-c10 -m100 by default) against `url` (127.0.0.1), with `sni_host` as the
    authority and the TLS server name (--connect-to keeps the connection on 127.0.0.1). With
    `log_path`, h2load writes one line per request there, and p50/p99 are computed from it."""
    host_url = re.sub(r"//127\.0\.0\.1:(\d+)", lambda m: f"//{sni_host}:{m.group(1)}", url)
    port = re.search(r"//127\.0\.0\.1:(\d+)", url).group(1)
    argv = taskset(args.load_cpus) + [
        "h2load", f"-c{args.h2_clients}", f"-m{args.h2_streams}", f"-t{args.threads}", f"-D{args.duration}",
        f"--warm-up-time=1", f"--connect-to=127.0.0.1:{port}",
    ] + ([f"--log-file={log_path}"] if log_path else []) + [host_url]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=args.duration + 60)
    out = r.stdout
    m = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", out)
    done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                     r"(\d+) errored, (\d+) timeout", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    lat = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out)
    proto = re.search(r"Application protocol: (\S+)", out)
    if r.returncode != 0 or not (m and done and codes):
        raise RuntimeError(f"h2load failed for {label} ({r.returncode}):\n{out}\n{r.stderr}")
    if not proto or proto.group(1) not in ("h2", "h2c"):
        raise RuntimeError(f"{label}: h2load did not speak HTTP/2 ({proto.group(1) if proto else 'unknown'})")

    def us(v):
        for suffix, mult in (("us", 1), ("ms", 1000), ("s", 1e6)):
            if v.endswith(suffix):
                return float(v[: -len(suffix)]) * mult
        return float("nan")
    res = {
        "requests": int(done.group(4)),
        "duration_us": float(m.group(1)) * 1e6,
        "errors": int(done.group(5)) + int(done.group(6)) + int(done.group(7)) + int(codes.group(2))
                  + int(codes.group(3)) + int(codes.group(4)),
        "mean_us": us(lat.group(3)) if lat else float("nan"),
        "max_us": us(lat.group(2)) if lat else float("nan"),
    }
    if log_path:
        vals = h2load_log_latencies(log_path)
        os.unlink(log_path)
        res.update(p50_us=percentile(vals, 50), p99_us=percentile(vals, 99), logged=len(vals))
    return res


def measure_h2(args, server, backend, url, sni_host, label=""):
    """One h2load run; CPU of the proxy and the backend read from /proc around it."""
    c0, w0, b0 = server.cpu(), server.worker_cpu(), backend.cpu()
    (m0, st0), k0, lo0 = machine_ticks(), own_ticks(), listen_overflows()
    t0 = time.monotonic()
    h = run_h2load(args, url, sni_host, label, log_path=os.path.join(args.tmp_dir, "h2load-requests.log"))
    c1, w1, b1 = server.cpu(), server.worker_cpu(), backend.cpu()
    (m1, st1), k1, lo1 = machine_ticks(), own_ticks(), listen_overflows()
    n = h["requests"]
    secs = h["duration_us"] / 1e6
    res = {
        "requests": n, "rps": n / secs if secs else 0.0, "errors": h["errors"],
        # h2load prints no percentiles: p50 and p99 come from its per-request log (--log-file)
        "p50_us": h["p50_us"], "p99_us": h["p99_us"], "mean_us": h["mean_us"], "max_us": h["max_us"],
        "logged_requests": h["logged"], "listen_overflows": lo1 - lo0,
        "cpu_s": (c1 - c0) / CLK_TCK, "backend_cpu_s": (b1 - b0) / CLK_TCK, "wall_s": time.monotonic() - t0,
        "rss_mb": server.rss_mb(), "resched_ipis_per_req": float("nan"),
    }
    wall = res["wall_s"] * CLK_TCK
    res["foreign_cpus"] = max(0.0, ((m1 - m0) - (c1 - c0) - (b1 - b0) - (k1 - k0)) / wall) if wall else 0.0
    res["steal_cpus"] = (st1 - st0) / wall if wall else 0.0
    res["cpu_us_per_req"] = res["cpu_s"] * 1e6 / n if n else float("nan")
    if server.worker_prefix:
        res["worker_cpu_us_per_req"] = (w1 - w0) / CLK_TCK * 1e6 / n if n else float("nan")
    res["backend_cpu_us_per_req"] = res["backend_cpu_s"] * 1e6 / n if n else float("nan")
    log(f"  {label:<28} {res['rps']:>9.0f} req/s  mean {res['mean_us']/1000:6.2f} ms  p50 {res['p50_us']/1000:6.2f} ms  "
        f"p99 {res['p99_us']/1000:6.2f} ms  errors {res['errors']:<5} (logged {res['logged_requests']})  "
        f"cpu {res['cpu_us_per_req']:6.2f} us/req"
        + (f" (worker {res['worker_cpu_us_per_req']:.2f})" if "worker_cpu_us_per_req" in res else "")
        + f"  foreign load {res['foreign_cpus']:.2f} CPUs  listen overflows {res['listen_overflows']}")
    return res


def idle_h2_memory(server, port, sni_host, n):
    """Resident memory an idle h2c connection holds: open `n` connections (preface, SETTINGS, one
    request so that the connection is fully set up), keep them open and idle, and compare."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    # HEADERS on stream 1 (END_STREAM | END_HEADERS): GET http://<host>/p7/idle, literal fields
    def lit(name, value):
        return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
    block = b"\x82\x86" + lit(b":path", b"/p7/idle") + lit(b":authority", sni_host.encode())
    headers = len(block).to_bytes(3, "big") + b"\x01\x05" + (1).to_bytes(4, "big") + block
    time.sleep(0.5)
    before = server.rss_mb() * 1024
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(preface + headers)
            socks.append(s)
        for s in socks:  # each answered: SETTINGS, ACK, the response
            s.recv(65536)
        time.sleep(1.0)
        after = server.rss_mb() * 1024
    finally:
        for s in socks:
            s.close()
    return (after - before) / n


# The idle section: memory of idle keep-alive HTTP/1.1 client connections. Both servers answer from
# themselves (a `respond` backend, `return 200`), so no upstream connection is part of the figure.
IDLE_ROUTES = ("# generated by benches/proxy/bench.py: the idle section's ramjet answers from itself\n"
               "backends:\n  ok: { respond: { status: 200, body: \"ok\" } }\nroutes:\n  - { path: /, backend: ok }\n")


def write_idle_nginx_conf(d, port, n, tls=None):
    """nginx answering `return 200` on `port`; over TLS with `tls` = (certificate, key)."""
    path = f"{d}/nginx-idle.conf"
    with open(path, "w") as f:
        f.write(nginx_head(d, "nginx-idle", worker_connections=max(8192, n + 1024)))
        f.write("http {\n  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 600s;\n")
        f.write(nginx_temp_paths(d, "nginx-idle"))
        ssl = (f" ssl default_server;\n    ssl_certificate {tls[0]};\n    ssl_certificate_key {tls[1]};\n"
               "    ssl_protocols TLSv1.2 TLSv1.3;\n") if tls else " default_server;\n"
        f.write(f'  server {{\n    listen 127.0.0.1:{port}{ssl}    location / {{ return 200 "ok"; }}\n  }}\n}}\n')
    return path


def read_http_answer(sock, what):
    """Read one HTTP/1.1 answer (head and Content-Length body) from a keep-alive connection; raises
    unless it is a 200."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError(f"{what}: connection closed before the answer")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError(f"{what}: connection closed in the body")
        body += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"{what}: answered {head[:200]!r}")


def idle_open(port, n, what, tls=False):
    """`n` keep-alive connections to 127.0.0.1:port (over TLS, each a full handshake, when `tls`), each
    with one request sent and its answer read: every one established, served once, and then idle in its
    keep-alive wait. The caller closes them."""
    req = b"GET /idle HTTP/1.1\r\nHost: bench\r\n\r\n"
    ctx = None
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    conns = []
    try:
        # Each request right after its connection: 5,000 handshakes take longer than a server's header
        # timeout (ramjet's 10 s), so requests sent after all of them would find the first closed.
        for _ in range(n):
            c = socket.create_connection(("127.0.0.1", port), timeout=30)
            if ctx:
                c = ctx.wrap_socket(c, server_hostname="bench.local")
            conns.append(c)
            c.sendall(req)
            read_http_answer(c, what)
    except BaseException:
        for c in conns:
            c.close()
        raise
    return conns


def idle_rounds(servers, n, rounds, settle, after_close):
    """servers: {name: (Server, port, tls)}. After one request to each and `after_close` s, the start figure;
    then per round: `n` idle connections to every server at once, `settle` s, RSS; all closed,
    `after_close` s, RSS again. RSS: VmRSS of the process and its children, KiB."""
    for name, (_, port, tls) in servers.items():
        for c in idle_open(port, 1, name, tls):
            c.close()
    time.sleep(after_close)
    out = {name: {"start_kib": tree_rss_kb(srv.proc.pid), "rounds": []} for name, (srv, _, _) in servers.items()}
    for r in range(rounds):
        log(f" round {r + 1}/{rounds}")
        before = {name: tree_rss_kb(srv.proc.pid) for name, (srv, _, _) in servers.items()}
        held, opened = {}, {}
        try:
            for name, (_, port, tls) in servers.items():
                t0 = time.monotonic()
                held[name] = idle_open(port, n, name, tls)
                opened[name] = time.monotonic() - t0
            time.sleep(settle)
            idle = {name: tree_rss_kb(srv.proc.pid) for name, (srv, _, _) in servers.items()}
        finally:
            for conns in held.values():
                for c in conns:
                    c.close()
        time.sleep(after_close)
        for name, (srv, _, _) in servers.items():
            row = {"before_kib": before[name], "idle_kib": idle[name], "after_kib": tree_rss_kb(srv.proc.pid),
                   "open_s": opened[name]}
            row["per_conn_bytes"] = (row["idle_kib"] - row["before_kib"]) * 1024 / n
            row["per_conn_bytes_vs_start"] = (row["idle_kib"] - out[name]["start_kib"]) * 1024 / n
            row["after_vs_start"] = ratio(row["after_kib"], out[name]["start_kib"])
            out[name]["rounds"].append(row)
            log(f"  idle {name:<34} before {row['before_kib'] / 1024:7.1f} MiB  with {n} idle "
                f"{row['idle_kib'] / 1024:7.1f} MiB ({row['per_conn_bytes'] / 1024:.2f} KiB each)  after closing "
                f"{row['after_kib'] / 1024:7.1f} MiB ({row['after_vs_start']:.3f} x start)  opened in {row['open_s']:.1f}s")
    for name, o in out.items():
        rows = o["rounds"]
        o["summary"] = {
            "per_conn_bytes": statistics.median(x["per_conn_bytes"] for x in rows),
            "per_conn_bytes_first": rows[0]["per_conn_bytes"],
            "per_conn_bytes_vs_start": statistics.median(x["per_conn_bytes_vs_start"] for x in rows),
            "after_vs_start_last": rows[-1]["after_vs_start"],
            "after_vs_start_max": max(x["after_vs_start"] for x in rows),
        }
    return out


# A mirror that accepts, reads the request head, and answers only after --mirror-sleep seconds.
SLOW_MIRROR = r"""
import asyncio, signal, sys

seen = {"connections": 0, "requests": 0}

async def handle(reader, writer):
    seen["connections"] += 1
    try:
        await reader.readuntil(b"\r\n\r\n")
        seen["requests"] += 1
        await asyncio.sleep(float(sys.argv[2]))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        await writer.drain()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()
    print(f"SLOWMIRROR connections={seen['connections']} requests={seen['requests']}", file=sys.stderr, flush=True)

asyncio.run(main())
"""


def run_h1_count(args, port, host_header, n, label="", path="/p7/bench", headers=(), status="2xx",
                 host_port=True, scheme="http"):
    """Exactly `n` HTTP/1.1 keep-alive requests (h2load --h1 -n, one request in flight per connection)
    over --insn-connections connections, with `headers` ("name: value") added; fails unless every one
    answered with a status of the class `status` ("2xx" or "3xx"). `host_port`: Host carries the port
    (otherwise it is `host_header` alone, as wrk sends it)."""
    argv = taskset(args.load_cpus) + [
        "h2load", "--h1", f"-n{n}", f"-c{args.insn_connections}", "-m1", "-t1", f"--connect-to=127.0.0.1:{port}"]
    for h in headers:
        argv += ["-H", h]
    argv.append(f"{scheme}://{host_header}{f':{port}' if host_port else ''}{path}")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", r.stdout)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx", r.stdout)
    got = int(codes.group(1 if status == "2xx" else 2)) if codes else -1
    if r.returncode != 0 or not done or int(done.group(4)) != n or got != n:
        raise RuntimeError(f"h2load --h1 -n{n} failed for {label} ({r.returncode}):\n{r.stdout}\n{r.stderr}")


# The source files of a route's policy on the request path: the policy checks in dispatch, the rule
# walk and the weighted pick (Route::pick, Rule::pick, scale) and the worker's draw (Worker::random).
# Callgrind books inlined code to the source line it came from, so their self cost is the policy's.
POLICY_SOURCES = ("dataplane/src/pipeline/route.rs", "shared/src/route.rs", "shared/src/route/policy.rs",
                  "dataplane/src/worker.rs")


def callgrind_file_costs(path):
    """(total Ir, is_worker, {source file: self Ir}, {function: self Ir}) of one callgrind output file
    (events: Ir, positions: line). The cost lines after `calls=` are a call's inclusive cost and are
    skipped; `fi=` and `fe=` switch to the source file of inlined code (the function stays the one
    `fn=` named: inlined code is its caller's self cost)."""
    names, by_file, fnames, by_fn = {}, {}, {}, {}
    total, worker, fl, cur, skip, fn = None, False, None, None, False, None
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                if skip:
                    skip = False
                    continue
                parts = line.split()
                if len(parts) > 1:
                    by_file[cur] = by_file.get(cur, 0) + int(parts[1])
                    by_fn[fn] = by_fn.get(fn, 0) + int(parts[1])
                continue
            key, _, val = line.rstrip("\n").partition("=")
            if key in ("fl", "fi", "fe", "cfi", "cfl"):
                m = re.match(r"\((\d+)\)(?: (.*))?$", val)
                if m and m.group(2) is not None:
                    names[m.group(1)] = m.group(2)
                name = names.get(m.group(1)) if m else val
                if key == "fl":
                    fl = cur = name
                elif key in ("fi", "fe"):
                    cur = name
            elif key in ("fn", "cfn"):
                # Function names are compressed too: "(id) name" the first time, in fn= or in cfn=
                # (a callee named first as a call target), "(id)" after.
                m = re.match(r"\((\d+)\)(?: (.*))?$", val)
                if m and m.group(2) is not None:
                    fnames[m.group(1)] = m.group(2)
                if key == "fn":
                    cur = fl
                    name = fnames.get(m.group(1), "") if m else val
                    fn = name
                    if not worker and "ramjet_dataplane::" in name and "run_worker" in name:
                        worker = True
            elif key == "calls":
                skip = True
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
    return total, worker, by_file, by_fn


def callgrind_threads(prefix):
    """[(Ir, is_worker, {source file: self Ir}, {function: self Ir})] per thread file of one callgrind run
    (--separate-threads=yes). The worker thread is the one whose file names
    ramjet_dataplane's run_worker (its entry function)."""
    out = []
    for path in sorted(glob.glob(prefix + "*")):
        if os.path.getsize(path) == 0:  # the process-wide file stays empty with --separate-threads=yes
            continue
        total, worker, by_file, by_fn = callgrind_file_costs(path)
        if total is None:
            raise RuntimeError(f"{path}: no totals line (did callgrind finish writing it?)")
        out.append((total, worker, by_file, by_fn))
    if not out:
        raise RuntimeError(f"callgrind wrote nothing at {prefix}*")
    return out


def gw_insn_summary(runs, fn_rows, kinds, sides, lo, hi, rounds):
    """Per (side, kind): instructions per request of the worker thread, (Ir(hi) - Ir(lo)) / (hi - lo),
    median over rounds; per kind: HTTPRoute / Ingress, and the functions and source files whose
    self cost per request differs most between the two sides (medians over rounds)."""
    n = hi - lo
    by = {(x["side"], x["kind"], x["requests"], x["round"]): x for x in runs}
    per_side, diffs = {}, {}
    for kind in kinds:
        for side in sides:
            pairs = [(by[(side, kind, lo, r)], by[(side, kind, hi, r)]) for r in range(rounds)]
            per = {k: [(b[f"{k}_ir"] - a[f"{k}_ir"]) / n for a, b in pairs] for k in ("worker", "process", "policy")}
            s = {f"{k}_ir_per_req": statistics.median(v) for k, v in per.items()}
            s.update({f"{k}_ir_per_req_rounds": v for k, v in per.items()})
            s["policy_ir_per_req_by_file"] = {
                src: statistics.median((b["policy_ir_by_file"][src] - a["policy_ir_by_file"][src]) / n for a, b in pairs)
                for src in POLICY_SOURCES}
            s["mirror_sent_per_req"] = statistics.median((b["mirror_sent"] - a["mirror_sent"]) / n for a, b in pairs)
            for which, idx in (("fn", 1), ("file", 0)):
                names = set()
                for r in range(rounds):
                    names |= set(fn_rows[(side, kind, lo, r)][idx]) | set(fn_rows[(side, kind, hi, r)][idx])
                s[f"_{which}"] = {
                    name: statistics.median((fn_rows[(side, kind, hi, r)][idx].get(name, 0)
                                             - fn_rows[(side, kind, lo, r)][idx].get(name, 0)) / n
                                            for r in range(rounds)) for name in names}
            per_side[(side, kind)] = s
        a, b = per_side[("ingress", kind)], per_side[("httproute", kind)]
        d = {"ratio": ratio(b["worker_ir_per_req"], a["worker_ir_per_req"]),
             "paired_ratio": statistics.median(
                 ratio(hb, ha) for ha, hb in zip(a["worker_ir_per_req_rounds"], b["worker_ir_per_req_rounds"])),
             "difference": b["worker_ir_per_req"] - a["worker_ir_per_req"]}
        for which in ("fn", "file"):
            names = set(a[f"_{which}"]) | set(b[f"_{which}"])
            delta = {x: (a[f"_{which}"].get(x, 0.0), b[f"_{which}"].get(x, 0.0)) for x in names}
            top = sorted(delta.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))[:15]
            d[f"top_{which}s"] = [{"name": x or "?", "ingress": ia, "httproute": ib, "difference": ib - ia}
                                  for x, (ia, ib) in top if abs(ib - ia) >= 0.5]
        diffs[kind] = d
    out = {"summary": {}, "differences": diffs, "runs": runs}
    for (side, kind), s in per_side.items():
        out["summary"][f"{side} {kind}"] = {k: v for k, v in s.items() if not k.startswith("_")}
    return out


def ramjet_mirror_counts(admin_port):
    """ramjet_mirror_requests_total by outcome (sent, dropped), from /metrics."""
    _, body = admin_request(admin_port, "GET", "/metrics")
    out = {"sent": 0, "dropped": 0}
    for m in re.finditer(rb'^ramjet_mirror_requests_total\{outcome="(\w+)"\} (\d+)', body, re.M):
        out[m.group(1).decode()] = int(m.group(2))
    return out


class Churner:
    """Runs `action` every `interval` seconds on a thread until finish(); bounded by max_count."""

    def __init__(self, interval, action, max_count, collect=None):
        self.interval, self.action, self.max_count = interval, action, max_count
        self.collect = collect
        self.ok = self.failed = 0
        self.errors = []
        self.pending = []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.before = collect() if collect else None
        self.t.start()

    def _run(self):
        start = time.monotonic()
        for k in range(self.max_count):
            if self.stop.wait(max(0.0, start + k * self.interval - time.monotonic())):
                return
            try:
                r = self.action(k)
                if isinstance(r, subprocess.Popen):  # runs on its own; collected in finish()
                    self.pending.append(r)
                else:
                    self.ok += 1
            except Exception as e:  # noqa: BLE001 - reported, never fatal to the measurement
                self._fail(str(e))

    def _fail(self, msg):
        self.failed += 1
        if len(self.errors) < 5:
            self.errors.append(msg)

    def finish(self):
        self.stop.set()
        self.t.join(timeout=30)
        for p in self.pending:
            try:
                _, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            if p.returncode == 0:
                self.ok += 1
            else:
                self._fail((err or b"").decode(errors="replace").strip()[-300:])
        out = {"churn_ok": self.ok, "churn_failed": self.failed}
        if self.errors:
            out["churn_errors"] = self.errors
        if self.collect:
            out["churn_observed"] = self.collect() - self.before
        return out


def ramjet_publishes(admin_port):
    _, body = admin_request(admin_port, "GET", "/metrics")
    m = re.search(rb"^ramjet_publish_duration_seconds_count(?:\{[^}]*\})? (\d+)", body, re.M)
    return int(m.group(1)) if m else 0


# Runs with less steal than this (CPUs' worth taken by the hypervisor) count as calm (pins section).
CALM_STEAL = 0.01


def admin_reads(admin_port, counts=None):
    """GET /admin/generations: an admin API call that changes nothing, for the pins section's control."""
    def act(_k):
        st, body = admin_request(admin_port, "GET", "/admin/generations")
        if st != 200:
            raise RuntimeError(f"admin answered {st} to GET /admin/generations: {body[:200]!r}")
        if counts is not None:
            counts["read"] = counts.get("read", 0) + 1
    return act


def ramjet_churn(admin_port, generation, counts=None):
    """Pin `generation` (POST /admin/rollback) and release it (DELETE) alternately; an answer other than
    200 raises (the Churner counts it as failed). `counts` ({"pin": n, "release": n}) counts the 200s."""
    def act(k):
        kind = "pin" if k % 2 == 0 else "release"
        if kind == "pin":
            st, body = admin_request(admin_port, "POST", "/admin/rollback", json.dumps({"generation": generation}))
        else:
            st, body = admin_request(admin_port, "DELETE", "/admin/rollback")
        if st != 200:
            raise RuntimeError(f"admin answered {st} to the {kind}: {body[:200]!r}")
        if counts is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return act


def nginx_reload(conf, d, how, master_pid):
    """`nginx -s reload` on schedule, without waiting for the previous one (it parses the whole
    configuration before it signals the master, which can take longer than the interval); or, with
    --nginx-reload signal, only the SIGHUP that command ends with."""
    def act(_k):
        if how == "signal":
            os.kill(master_pid, signal.SIGHUP)
            return None
        return subprocess.Popen(["nginx", "-p", d, "-c", conf, "-s", "reload"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return act


def nginx_reconfigurations(error_log):
    """Reloads the nginx master actually performed (its notice-level "reconfiguring" lines)."""
    try:
        with open(error_log, errors="replace") as f:
            return sum(1 for line in f if re.search(r"#\d+: reconfiguring\s*$", line))
    except OSError:
        return 0


# --------------------------------------------------------------------------------------------
# summaries


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")


def summarize(results, targets):
    out = {}
    for t in targets:
        rows = results.get(t, [])
        if not rows:
            continue
        out[t] = {k: med(rows, k) for k in ("rps", "p50_us", "p99_us", "cpu_us_per_req", "backend_cpu_us_per_req",
                                             "foreign_cpus", "steal_cpus", "resched_ipis_per_req")}
        if "worker_cpu_us_per_req" in rows[0]:
            out[t]["worker_cpu_us_per_req"] = med(rows, "worker_cpu_us_per_req")
        out[t]["errors"] = sum(r["errors"] for r in rows)
        out[t]["requests"] = sum(r["requests"] for r in rows)
        out[t]["rounds"] = len(rows)
        out[t]["rps_min"] = min(r["rps"] for r in rows)
        out[t]["rps_max"] = max(r["rps"] for r in rows)
        out[t]["cpu_min"] = min(r["cpu_us_per_req"] for r in rows)
        out[t]["cpu_max"] = max(r["cpu_us_per_req"] for r in rows)
        for k in ("churn_ok", "churn_failed", "churn_observed", "mirror_sent", "mirror_dropped", "listen_overflows",
                  "pins", "releases", "tw_recycled", "tw_overflow"):
            if k in rows[0]:
                out[t][k] = sum(r.get(k, 0) for r in rows)
        for k in ("time_wait_end", "time_wait_server", "time_wait_client"):
            if k in rows[0]:
                out[t][k + "_max"] = max(r.get(k, 0) for r in rows)
    return out


def ratio(a, b):
    return a / b if b else float("nan")


def table(summary, order):
    lines = [
        "| target | req/s (median, min–max) | p50 ms | p99 ms | errors | CPU µs/req (median, min–max) "
        "| of which worker thread | foreign load | resched IPIs/req |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in order:
        s = summary.get(t)
        if not s:
            continue
        lines.append(
            f"| {t} | {s['rps']:,.0f} ({s['rps_min']:,.0f}–{s['rps_max']:,.0f}) | {s['p50_us']/1000:.2f} | "
            f"{s['p99_us']/1000:.2f} | {s['errors']} of {s['requests']:,} | {s['cpu_us_per_req']:.2f} "
            f"({s['cpu_min']:.2f}–{s['cpu_max']:.2f}) | "
            + (f"{s['worker_cpu_us_per_req']:.2f} |" if "worker_cpu_us_per_req" in s else "– |")
            + f" {s['foreign_cpus']:.2f} | {s.get('resched_ipis_per_req', float('nan')):.3f} |")
    return "\n".join(lines)


def paired(rounds, a, b, key):
    """Median over rounds of the per-round ratio a/b (each pair ran back to back in one round)."""
    vals = [ra[key] / rb[key] for ra, rb in zip(rounds.get(a, []), rounds.get(b, [])) if rb[key]]
    return statistics.median(vals) if vals else float("nan")


RATIO_COLUMNS = {"rps": "req/s", "cpu_us_per_req": "CPU µs/req", "p50_us": "p50", "p99_us": "p99",
                 "worker_cpu_us_per_req": "worker thread CPU µs/req"}


def ratios(section, a, others, keys=("rps", "cpu_us_per_req", "p99_us")):
    return ratio_table(section, [(a, b) for b in others], keys)


def ratio_table(section, pairs, keys=("rps", "cpu_us_per_req", "p99_us")):
    """One row per (a, b): a's medians over b's, with the median of the per-round ratios in brackets."""
    summary, rounds = section["summary"], section["rounds"]
    lines = ["| ratio | " + " | ".join(RATIO_COLUMNS[k] for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for a, b in pairs:
        if a in summary and b in summary:
            sa, sb = summary[a], summary[b]
            cells = [f"{ratio(sa[k], sb[k]):.2f} ({paired(rounds, a, b, k):.2f})" for k in keys]
            lines.append(f"| {a} / {b} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Ratio of the medians; in brackets, the median of the per-round ratios. Foreign load: CPUs' "
                 "worth of work done by processes outside the benchmark during a run (median). Resched IPIs: "
                 "rescheduling interrupts on the whole machine per request (median).")
    return "\n".join(lines)


def verdicts(results):
    """The targets of issue 6, checked against the medians of this run."""
    secs, rows = results["sections"], []

    def check(what, value, target, ok):
        rows.append(f"| {what} | {value} | {target} | {'met' if ok else '**missed**'} |")

    if "http" in secs:
        s = secs["http"]["summary"]
        if all(k in s for k in ("ramjet", "nginx", "haproxy")):
            r, n, h = s["ramjet"], s["nginx"], s["haproxy"]
            check("CPU/request vs nginx", f"{ratio(r['cpu_us_per_req'], n['cpu_us_per_req']):.2f} ×", "≤ 0.75 ×",
                  r["cpu_us_per_req"] <= 0.75 * n["cpu_us_per_req"])
            check("CPU/request vs HAProxy", f"{ratio(r['cpu_us_per_req'], h['cpu_us_per_req']):.2f} ×", "≤ 0.80 ×",
                  r["cpu_us_per_req"] <= 0.8 * h["cpu_us_per_req"])
            check("requests/s vs nginx", f"{ratio(r['rps'], n['rps']):.2f} ×", "≥ 1.2 ×", r["rps"] >= 1.2 * n["rps"])
            check("requests/s vs HAProxy", f"{ratio(r['rps'], h['rps']):.2f} ×", "≥ 1.2 ×", r["rps"] >= 1.2 * h["rps"])
            check("p99 vs nginx", f"{ratio(r['p99_us'], n['p99_us']):.2f} ×", "≤ 0.8 ×", r["p99_us"] <= 0.8 * n["p99_us"])
    if "tls" in secs:
        s = secs["tls"]["summary"]
        if "ramjet" in s and "nginx" in s:
            check("HTTPS keep-alive requests/s vs nginx", f"{ratio(s['ramjet']['rps'], s['nginx']['rps']):.2f} ×",
                  "≥ 1.2 ×", s["ramjet"]["rps"] >= 1.2 * s["nginx"]["rps"])
    if "churn" in secs:
        s = secs["churn"]["summary"]
        if "ramjet churn" in s and "ramjet steady" in s:
            c, st = s["ramjet churn"], s["ramjet steady"]
            check("failed requests under 10 publishes/s", str(c["errors"]), "0", c["errors"] == 0)
            check("p99 under churn vs steady", f"{ratio(c['p99_us'], st['p99_us']):.2f} ×", "≤ 1.10 ×",
                  c["p99_us"] <= 1.1 * st["p99_us"])
            check("requests/s under churn vs steady", f"{ratio(c['rps'], st['rps']):.2f} ×", "≥ 0.95 ×",
                  c["rps"] >= 0.95 * st["rps"])
    if not rows:
        return ""
    return "\n".join(["| target (issue 6) | this run | target | |", "|---|---|---|---|"] + rows)


def verdicts_issue18(results):
    """The targets of issue 18 (the close, idle and pins sections), checked against this run."""
    secs, rows = results["sections"], []

    def check(what, value, target, ok):
        rows.append(f"| {what} | {value} | {target} | {'met' if ok else '**missed**'} |")

    if "close" in secs:
        s = secs["close"]["summary"]
        if "ramjet" in s and "nginx" in s:
            r, n = s["ramjet"], s["nginx"]
            c, q = ratio(r["cpu_us_per_req"], n["cpu_us_per_req"]), ratio(r["rps"], n["rps"])
            check("Connection: close, CPU/request vs nginx", f"{c:.2f} ×", "≤ 0.8 ×", c <= 0.8)
            check("Connection: close, requests/s vs nginx", f"{q:.2f} ×", "≥ 1.2 ×", q >= 1.2)
    if "idle" in secs:
        sv = secs["idle"]["servers"]
        name = next((k for k in sv if k.startswith("ramjet")), None)
        if name and secs["idle"]["config"].get("tls"):
            # Issue 18's 2 KB is for plain connections; an idle TLS connection is held against nginx's, both
            # from round 1 (nginx keeps round 1's memory and reuses it after).
            s, ng = sv[name]["summary"], sv.get("nginx", {}).get("summary")
            if ng:
                r = ratio(s["per_conn_bytes_first"], ng["per_conn_bytes_first"])
                check(f"memory per idle TLS connection vs nginx ({name}, round 1)", f"{r:.2f} ×", "≤ 1.0 ×", r <= 1.0)
        elif name:
            s = sv[name]["summary"]
            check(f"memory per idle connection ({name})", f"{s['per_conn_bytes']:,.0f} B", "≤ 2 KB (2,048 B)",
                  s["per_conn_bytes"] <= 2048)
            check(f"RSS after closing vs start ({name}, worst round)", f"{s['after_vs_start_max']:.3f} ×", "≤ 1.10 ×",
                  s["after_vs_start_max"] <= 1.10)
    if "pins" in secs:
        s = secs["pins"]["summary"].get("pinned", {})
        if "p99_ratio" in s:
            rate = results.get("pins_config", {}).get("rate")
            check(f"p99 under {rate:g} pins/releases per second vs quiet (median of per-round ratios)",
                  f"{s['p99_ratio']:.2f} ×", "≤ 1.1 ×", s["p99_ratio"] <= 1.1)
            calm = secs["pins"].get("calm", {})
            if "calm_p99_ratio" in s and min(calm.get(t, {}).get("runs", 0) for t in ("quiet", "pinned")) >= 3:
                check("the same, over the calm runs (steal-free; at least 3 of each)",
                      f"{s['calm_p99_ratio']:.2f} ×", "≤ 1.1 ×", s["calm_p99_ratio"] <= 1.1)
            check("failed pins/releases", str(s.get("churn_failed", 0)), "0", s.get("churn_failed", 0) == 0)
    if not rows:
        return ""
    return "\n".join(["| target (issue 18) | this run | target | |", "|---|---|---|---|"] + rows)


def render_issue18(results, args):
    """The close, idle and pins sections of results.md."""
    secs, out = results["sections"], []
    if "close" in secs:
        sec = secs["close"]
        s, cc = sec["summary"], results.get("close_config", {})
        targets = cc.get("targets", ["ramjet", "nginx"])
        sysctl = cc.get("sysctl", {})
        out += ["## A new connection per request (HTTP/1.1, `Connection: close`)", "",
                f"wrk -t{args.threads} -c{args.connections} -H 'Connection: close': every request on a connection of "
                "its own (wrk reconnects after each answer; its latency starts when the request is written, after "
                "the connect). The keep-alive section's proxies, routes and backend; the order flips every round. "
                "CPU: the proxy process (nginx: master and worker).", "",
                table(s, targets), "",
                ratios(sec, "ramjet", [t for t in targets if t != "ramjet"]), "",
                "| target | TIME_WAIT sockets at the end of a run (max; server end / client end) | connects that reused "
                "a TIME_WAIT port (TWRecycled) | TIME_WAIT not kept (table full) | SYNs dropped (listen queue full) |",
                "|---|---|---|---|---|"]
        for t in targets:
            if t in s:
                out.append(f"| {t} | {s[t].get('time_wait_end_max', 0):,} ({s[t].get('time_wait_server_max', 0):,} / "
                           f"{s[t].get('time_wait_client_max', 0):,}) | {s[t].get('tw_recycled', 0):,} | "
                           f"{s[t].get('tw_overflow', 0):,} | {s[t].get('listen_overflows', 0):,} |")
        out += ["", "Summed over rounds except the TIME_WAIT counts. Kernel settings (net.ipv4): " + ", ".join(
            f"{k} {v}" for k, v in sysctl.items()) + ". With tcp_tw_reuse 1 or 2 (2: loopback only) a connect "
            "may take a local port whose previous connection is still in TIME_WAIT, so the ephemeral range does "
            "not run out.", ""]
    if "idle" in secs:
        sec = secs["idle"]
        c, sv = sec["config"], sec["servers"]
        out += ["## Idle keep-alive client connections and memory", "",
                f"Fresh processes, one worker each, all open at once: per round {c['connections']:,} keep-alive "
                f"connections{' over HTTPS (a full TLS handshake each)' if c.get('tls') else ''} to each server, one request answered on each (ramjet from a `respond` backend, nginx "
                f"from `return 200`: no upstream connection), {c['settle_s']:g} s idle, RSS sampled; all closed, "
                f"{c['after_close_s']:g} s, RSS sampled again; {c['rounds']} round(s). RSS: VmRSS of the process and "
                "its children (nginx: master and worker). Per idle connection = (RSS with them − RSS before the "
                f"round) / {c['connections']:,}.", "",
                "| server | RSS at start | per idle connection, round 1 | per idle connection (median of rounds) | "
                "(against the start, median) | RSS after closing, last round | after closing / start (worst round) |",
                "|---|---|---|---|---|---|---|"]
        for name, o in sv.items():
            m = o["summary"]
            out.append(f"| {name} | {o['start_kib'] / 1024:.1f} MiB | {m['per_conn_bytes_first'] / 1024:.2f} KiB | "
                       f"{m['per_conn_bytes'] / 1024:.2f} KiB ({m['per_conn_bytes']:,.0f} B) | "
                       f"{m['per_conn_bytes_vs_start'] / 1024:.2f} KiB | {o['rounds'][-1]['after_kib'] / 1024:.1f} MiB | "
                       f"{m['after_vs_start_max']:.3f} × |")
        out += ["", "Per round (before → with the idle connections → after closing, MiB): " + "; ".join(
            f"{name}: " + ", ".join(f"{x['before_kib'] / 1024:.1f} → {x['idle_kib'] / 1024:.1f} → "
                                    f"{x['after_kib'] / 1024:.1f}" for x in o["rounds"]) for name, o in sv.items()) + ".",
                ""]
    if "pins" in secs:
        sec = secs["pins"]
        s, pc = sec["summary"], results.get("pins_config", {})
        out += ["## Pins and releases under load", "",
                f"One ramjet with {pc.get('routes'):,} routes ({pc.get('hosts'):,} hosts), wrk against "
                f"{pc.get('target_host')}; pinned: `POST /admin/rollback {{\"generation\": {pc.get('generation')}}}` "
                f"(the serving generation) and `DELETE /admin/rollback` alternately, {pc.get('rate'):g} per second "
                f"({pc.get('ops_per_run')} per run, each checked for 200), from a thread of the harness; quiet: the "
                "same run without them. Quiet and pinned alternate within each round, the order flipping every round, "
                "so both meet the same foreign load (columns below).", "",
                table(s, [t for t in ("quiet", "pinned", "quiet-again", "admin-reads") if t in s]), "",
                ratio_table(sec, [("pinned", "quiet")], ("p99_us", "p50_us", "rps", "cpu_us_per_req")), "",
                "| round | p99 quiet / pinned (ms) | pinned / quiet | req/s pinned / quiet | foreign load quiet / "
                "pinned (CPUs) | pins + releases answered 200 | control thread CPU per pin or release | all threads "
                "but the workers |", "|---|---|---|---|---|---|---|---|"]
        for i, (x, q, pr) in enumerate(zip(sec.get("per_round", []), sec["rounds"]["quiet"], sec["rounds"]["pinned"])):
            out.append(f"| {i + 1} | {q['p99_us'] / 1000:.2f} / {pr['p99_us'] / 1000:.2f} | {x['p99_ratio']:.2f} | "
                       f"{x['rps_ratio']:.3f} | {x['foreign_quiet']:.2f} / {x['foreign_pinned']:.2f} | "
                       f"{pr['pins']} + {pr['releases']} of {pr['pin_ops_sent']} | {x['control_cpu_us_per_op']:,.0f} µs | "
                       f"{x['outside_workers_cpu_us_per_op']:,.0f} µs |")
        p = s.get("pinned", {})
        if "p99_ratio" in p:
            out += ["", f"Medians over rounds: p99 pinned / quiet {p['p99_ratio']:.2f} ×, req/s {p['rps_ratio']:.3f} ×; "
                    f"CPU per pin or release: control thread (ramjet-control) {p['control_cpu_us_per_op']:,.0f} µs, all "
                    f"threads but the workers (control, admin API, main) {p['outside_workers_cpu_us_per_op']:,.0f} µs: "
                    "their run time (schedstat, ns) in the pinned run minus the quiet run's per second. The workers' "
                    "share (swapping the table in) is not separable from the per-request noise between two runs "
                    f"(whole process beyond the requests at the quiet CPU per request: {p['cpu_us_per_op']:,.0f} µs, "
                    "which is within that noise). Failed: "
                    f"{p.get('churn_failed', 0)}; publishes counted by ramjet (ramjet_publish_duration_seconds_count): "
                    f"{p.get('churn_observed', '–')}. Resident memory at the end: {results.get('rss_mb_pins', 0):.1f} MiB.",
                    ""]
        if sec.get("calm"):
            c = sec["calm"]
            out += [f"Calm runs (steal ≤ {CALM_STEAL} CPUs), median p99 and how many: "
                    + ", ".join(f"{t} {v['p99_us'] / 1000:.2f} ms ({v['runs']})" for t, v in c.items())
                    + f"; pinned / quiet {p.get('calm_p99_ratio', float('nan')):.2f} ×.", ""]
        if "quiet-again_p99_ratio" in p:
            rows = sec.get("per_round", [])
            out += ["Controls (`--pins-controls`), p99 against the round's quiet run, per round and median: "
                    "a second quiet run (the noise between two identical runs) "
                    + ", ".join(f"{x['quiet-again_p99_ratio']:.2f}" for x in rows)
                    + f" (median {p['quiet-again_p99_ratio']:.2f} ×); admin reads at the pin rate, no pin "
                    + ", ".join(f"{x['admin-reads_p99_ratio']:.2f}" for x in rows)
                    + f" (median {p['admin-reads_p99_ratio']:.2f} ×); pins and releases "
                    + ", ".join(f"{x['p99_ratio']:.2f}" for x in rows) + f" (median {p['p99_ratio']:.2f} ×).", ""]
    return out


# --------------------------------------------------------------------------------------------
# main


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ramjet", default=os.path.join(REPO, "target", "release", "ramjet"))
    ap.add_argument("--baseline", default=None,
                    help="another ramjet binary (an earlier build) measured side by side as `ramjet-base` "
                         "in the http and tls sections, to compare two builds in one run")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per section (default 5)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run (default 10)")
    ap.add_argument("--connections", type=int, default=50, help="wrk -c (default 50)")
    ap.add_argument("--threads", type=int, default=1, help="wrk -t (default 1)")
    ap.add_argument("--warmup", type=int, default=2, help="seconds of unmeasured load per target first")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of quiet after a churn run (default 3)")
    ap.add_argument("--sections", default="http,tls,handshake,churn",
                    help="comma list of http,tls,handshake,resume,churn,h2,accesslog,canary,mirror,instructions,"
                         "gateway,close,idle,pins (default: http,tls,handshake,churn)")
    ap.add_argument("--gw-kinds", default=",".join(GW_KINDS),
                    help=f"gateway section: the request kinds, a comma list of {','.join(GW_KINDS)} (default: all)")
    ap.add_argument("--gw-parts", default="wrk,insn",
                    help="gateway section: wrk (rps and CPU, both sides side by side, --rounds x --duration) and/or "
                         "insn (callgrind, --insn-rounds x --insn-base/--insn-requests) (default: wrk,insn)")
    ap.add_argument("--h2-clients", type=int, default=10, help="h2load -c in the h2 section (default 10)")
    ap.add_argument("--h2-streams", type=int, default=100, help="h2load -m in the h2 section (default 100)")
    ap.add_argument("--idle-tls", action="store_true",
                    help="the idle section over HTTPS: ramjet with --default-certificate, nginx `listen ssl`, "
                         "a full TLS handshake per connection")
    ap.add_argument("--nginx-keepalive", type=int, default=64,
                    help="nginx's `keepalive` (idle upstream connections kept per worker) in the h2 section "
                         "(default 64; ramjet keeps --upstream-keepalive-connections, 1,024 by default)")
    ap.add_argument("--backend-backlog", type=int, default=None,
                    help="listen backlog of the backend nginx (default: nginx's 511). The h2 section opens up to "
                         "one upstream connection per stream in flight; when the backend's accept queue "
                         "overflows, a dropped SYN costs its connect 1 s, which then is the p99")
    ap.add_argument("--h2-idle", type=int, default=1000, help="idle HTTP/2 connections for the memory figure")
    ap.add_argument("--insn-requests", type=int, default=20000,
                    help="instructions section: the difference N2 - N1 of the two runs' request counts (default 20000)")
    ap.add_argument("--insn-base", type=int, default=1000,
                    help="instructions section: N1, the request count of the shorter run (default 1000)")
    ap.add_argument("--insn-connections", type=int, default=1,
                    help="instructions section: keep-alive connections of h2load --h1 (default 1: one request at "
                         "a time, so no batching of requests varies between runs)")
    ap.add_argument("--insn-tls", action="store_true",
                    help="instructions section: the requests over HTTPS keep-alive (ramjet with --default-certificate)")
    ap.add_argument("--insn-rounds", type=int, default=5,
                    help="instructions section: repeat the four callgrind runs this often; medians (default 5)")
    ap.add_argument("--insn-driver", choices=("io-uring", "legacy"), default="io-uring",
                    help="instructions section: ramjet's --io-driver under valgrind (default io-uring, with a "
                         "valgrind that can count it: benches/budget/valgrind.py)")
    ap.add_argument("--mirror-sleep", type=float, default=5.0,
                    help="seconds the slow mirror of the mirror section waits before it answers (default 5)")
    ap.add_argument("--routes", type=int, default=1000, help="routes per proxy in http/tls/handshake (default 1000)")
    ap.add_argument("--churn-routes", type=int, default=10000, help="ramjet routes in the churn section (default 10000)")
    ap.add_argument("--churn-vhosts", type=int, default=1000, help="nginx vhosts in the churn section (default 1000)")
    ap.add_argument("--publish-rate", type=float, default=10.0, help="ramjet publishes per second under churn")
    ap.add_argument("--pin-rate", type=float, default=20.0,
                    help="pins section: pins and releases per second, alternately, through the admin API (default 20: "
                         "10 of each)")
    ap.add_argument("--pins-controls", action="store_true",
                    help="pins section: two more runs per round, to tell the pins' effect from the machine's noise: "
                         "quiet-again (a second quiet run: the spread of p99 between two identical runs) and "
                         "admin-reads (GET /admin/generations at --pin-rate: the admin API's traffic without a pin)")
    ap.add_argument("--idle-connections", type=int, default=5000,
                    help="idle section: idle keep-alive connections opened to each server per round (default 5000)")
    ap.add_argument("--idle-rounds", type=int, default=3, help="idle section: rounds (default 3)")
    ap.add_argument("--idle-settle", type=float, default=15.0,
                    help="idle section: seconds the connections sit idle before RSS is sampled (default 15: "
                         "well past ramjet's --idle-release-after and its buffer trims)")
    ap.add_argument("--idle-after-close", type=float, default=12.0,
                    help="idle section: seconds after closing them before RSS is sampled again (default 12)")
    ap.add_argument("--idle-release-after", default="1s",
                    help="idle section: ramjet's --idle-release-after, a comma list for one ramjet each (up to 4; "
                         "default 1s, ramjet's default; benches/idle-memory/run.sh adds 1h, the release out of reach)")
    ap.add_argument("--reload-rate", type=float, default=1.0, help="nginx reloads per second under churn")
    ap.add_argument("--nginx-reload", choices=("cli", "signal"), default="cli",
                    help="how nginx reloads under churn: `nginx -s reload` (default), or SIGHUP to the master "
                         "(skips the command's own parse of the configuration)")
    ap.add_argument("--port-base", type=int, default=27100, help="first of the 127.0.0.1 ports used (default 27100)")
    ap.add_argument("--pin", action="store_true",
                    help="pin the proxy under test to CPU 0, wrk and the backend to the other CPUs "
                         "(default: no pinning besides ramjet pinning its own worker, as a user runs it)")
    ap.add_argument("--profile", action="store_true",
                    help="after the http section, `perf record -e cpu-clock -g` ramjet during one more wrk run")
    ap.add_argument("--out", default=None, help="directory for results.json and results.md "
                    "(default target/bench-proxy/<timestamp>)")
    ap.add_argument("--keep-temp", action="store_true", help="keep the generated configs")
    a = ap.parse_args()
    a.sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    bad = set(a.sections) - {"http", "tls", "handshake", "resume", "churn", "h2", "accesslog", "canary", "mirror",
                             "instructions", "gateway", "close", "idle", "pins"}
    if bad:
        ap.error(f"unknown sections: {', '.join(sorted(bad))}")
    a.gw_kinds = [k.strip() for k in a.gw_kinds.split(",") if k.strip()]
    a.gw_parts = [k.strip() for k in a.gw_parts.split(",") if k.strip()]
    if not a.gw_kinds or set(a.gw_kinds) - set(GW_KINDS) or not a.gw_parts or set(a.gw_parts) - {"wrk", "insn"}:
        ap.error(f"--gw-kinds takes {','.join(GW_KINDS)}; --gw-parts takes wrk,insn")
    if a.routes % ROUTES_PER_HOST or a.churn_routes % ROUTES_PER_HOST:
        ap.error(f"route counts must be multiples of {ROUTES_PER_HOST} (that many routes per host)")
    if not (1 <= a.rounds <= 50 and 1 <= a.duration <= 600):
        ap.error("--rounds must be 1..50 and --duration 1..600")
    a.idle_release_after = [x.strip() for x in a.idle_release_after.split(",") if x.strip()]
    if not (1 <= len(a.idle_release_after) <= 4 and 1 <= a.idle_connections <= 100000 and 1 <= a.idle_rounds <= 50):
        ap.error("--idle-release-after takes 1 to 4 durations, --idle-connections 1..100000, --idle-rounds 1..50")
    if not 0 < a.pin_rate <= 1000:
        ap.error("--pin-rate must be in (0, 1000]")
    ncpu = os.cpu_count() or 1
    a.proxy_cpus = "0" if a.pin else None
    a.load_cpus = (f"1-{ncpu - 1}" if ncpu > 2 else "1") if a.pin and ncpu > 1 else None
    return a


def machine_info(args, driver_line):
    def cmd(*argv):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (r.stdout + r.stderr).strip().splitlines()[0]
        except Exception:  # noqa: BLE001
            return "unknown"
    cpu_model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            cpu_model = m.group(1) if m else cpu_model
    except OSError:
        pass
    try:
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        git = "unknown"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu_model,
        "kernel": platform.release(),
        "os": cmd("sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"),
        "ramjet_driver": driver_line,
        "ramjet_commit": git,
        "ramjet_sha256": subprocess.run(["sha256sum", args.ramjet], capture_output=True, text=True).stdout[:12],
        "wrk": cmd("sh", "-c", "wrk -v 2>&1 | head -1"),
        "nginx": cmd("nginx", "-v"),
        "haproxy": cmd("haproxy", "-v"),
        "openssl": cmd("openssl", "version"),
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "pin": args.pin,
    }


def probe_driver(args, routes, d, ports):
    """Start ramjet once at info level only to read the driver line it logs, then stop it."""
    p = start_ramjet(args, "ramjet-probe", routes, d, *ports, log_level="info")
    PROCS.stop(p)
    with open(f"{d}/ramjet-probe.stderr", errors="replace") as f:
        text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
    m = re.search(r"driver (.+?)(?:\s+worker=\d+)?\s*$", text, re.M)
    return m.group(1) if m else "unknown (no driver line logged)"


def main():
    args = parse_args()
    # the idle section holds thousands of client ends here, and the servers started inherit the limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    atexit.register(PROCS.stop_all)
    if "instructions" in args.sections or ("gateway" in args.sections and "insn" in args.gw_parts):
        # A valgrind that can count the io_uring driver (Debian 12's 3.19 cannot), fetched if need be.
        global VALGRIND
        sys.path.insert(0, os.path.join(REPO, "benches", "budget"))
        from valgrind import command
        VALGRIND = command(os.path.join(REPO, "target"))
    tools = ("wrk", "nginx", "haproxy", "openssl", "gcc") + (("taskset",) if args.pin else ())
    tools += (("h2load",) if {"h2", "instructions", "gateway"} & set(args.sections) else ())
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"bench: `{tool}` is not installed (benches/proxy/run.sh installs it)")
    if not os.access(args.ramjet, os.X_OK):
        sys.exit(f"bench: no ramjet binary at {args.ramjet}; build it: cargo build --release --bin ramjet")

    ports = {name: args.port_base + i for i, name in enumerate([
        "backend", "ramjet_http", "ramjet_https", "ramjet_admin", "nginx_http", "nginx_https",
        "haproxy_http", "haproxy_https", "probe_http", "probe_https", "probe_admin",
        "ramjet10k_http", "ramjet10k_https", "ramjet10k_admin", "nginx10k_http", "nginx10k_https",
        "ramjet-base_http", "ramjet-base_https", "ramjet-base_admin", "ramjet-h2_http", "ramjet-h2_https",
        "ramjet-h2_admin", "nginx-h2_http", "nginx-h2_https", "ramjet-log_http", "ramjet-log_https",
        "ramjet-log_admin", "nginx-log_http", "nginx-log_https", "ramjet-canary_http", "ramjet-canary_https",
        "ramjet-canary_admin", "ramjet-mirror_http", "ramjet-mirror_https", "ramjet-mirror_admin",
        "mirror-down", "mirror-slow", "ramjet-insn_http", "ramjet-insn_https", "ramjet-insn_admin",
        "gw-stable", "gw-beta", "gw-shadow", "ramjet-gwi_http", "ramjet-gwi_https", "ramjet-gwi_admin",
        "ramjet-gwh_http", "ramjet-gwh_https", "ramjet-gwh_admin", "ramjet-gwinsn_http", "ramjet-gwinsn_https",
        "ramjet-gwinsn_admin", "ramjet-pins_http", "ramjet-pins_https", "ramjet-pins_admin", "nginx-idle_http"]
        + [f"ramjet-idle{i}_{k}" for i in range(4) for k in ("http", "https", "admin")] + ["nginx-idle_https"])}
    busy = [f"{n}={p}" for n, p in ports.items() if not port_free(p)]
    if busy:
        sys.exit(f"bench: ports already in use on 127.0.0.1: {', '.join(busy)}; pick another --port-base")

    out_dir = args.out or os.path.join(REPO, "target", "bench-proxy", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    d = tempfile.mkdtemp(prefix="ramjet-bench-")
    args.tmp_dir = d
    log(f"configs and logs in {d}; results in {out_dir}")
    results = {"sections": {}, "args": {k: v for k, v in vars(args).items()}}
    try:
        # a private copy: a rebuild of target/release during the run cannot change what is measured
        shutil.copy2(args.ramjet, f"{d}/ramjet")
        args.ramjet_source, args.ramjet = args.ramjet, f"{d}/ramjet"
        if args.baseline:
            shutil.copy2(args.baseline, f"{d}/ramjet-base")
            args.baseline = f"{d}/ramjet-base"
        cert, key, combined = make_cert(d)
        shim = build_shim(d)
        hosts = args.routes // ROUTES_PER_HOST
        target_i = min(42, hosts - 1)
        target_host, target_path = host(target_i), "/p7/bench"

        bconf = write_backend_conf(d, ports["backend"], args.backend_backlog)
        backend_p = start_nginx("backend", bconf, d, ports["backend"], args.load_cpus)
        backend = Server("backend", backend_p, [ports["backend"]])
        check_route("backend", ports["backend"], target_host, target_path)

        routes = f"{d}/ramjet-routes.yaml"
        write_ramjet_routes(routes, hosts, ports["backend"], cert, key)
        driver = probe_driver(args, routes, d, (ports["probe_http"], ports["probe_https"], ports["probe_admin"]))
        info = machine_info(args, driver)
        results["machine"] = info
        log(f"machine: {info}")

        need_main = any(s in args.sections for s in ("http", "tls", "handshake", "resume", "accesslog", "close"))
        servers = {}
        if need_main:
            rj = start_ramjet(args, "ramjet", routes, d, ports["ramjet_http"], ports["ramjet_https"],
                              ports["ramjet_admin"], cpus=args.proxy_cpus)
            servers["ramjet"] = Server("ramjet", rj, [ports["ramjet_http"], ports["ramjet_https"]],
                                       worker_prefix="ramjet-worker")
            nconf = write_nginx_proxy_conf(d, "nginx", hosts, ports["nginx_http"], ports["nginx_https"],
                                           ports["backend"], cert, key)
            ng = start_nginx("nginx", nconf, d, ports["nginx_http"], args.proxy_cpus)
            servers["nginx"] = Server("nginx", ng, [ports["nginx_http"], ports["nginx_https"]])
            hconf = write_haproxy_conf(d, hosts, ports["haproxy_http"], ports["haproxy_https"], ports["backend"],
                                       combined)
            ha = PROCS.start("haproxy", taskset(args.proxy_cpus) + ["haproxy", "-f", hconf, "-db"],
                             stop_signal=signal.SIGTERM, stderr_path=f"{d}/haproxy.stderr")
            wait_port(ports["haproxy_http"], ha, "haproxy")
            servers["haproxy"] = Server("haproxy", ha, [ports["haproxy_http"], ports["haproxy_https"]])
            if args.baseline:
                rb = start_ramjet(args, "ramjet-base", routes, d, ports["ramjet-base_http"],
                                  ports["ramjet-base_https"], ports["ramjet-base_admin"], cpus=args.proxy_cpus,
                                  binary=args.baseline)
                servers["ramjet-base"] = Server("ramjet-base", rb,
                                                [ports["ramjet-base_http"], ports["ramjet-base_https"]],
                                                worker_prefix="ramjet-worker")
            for name in servers:
                check_route(name, ports[f"{name}_http"], target_host, target_path)
                check_route(name, ports[f"{name}_https"], target_host, target_path, tls=True)
            results["tls_negotiated"] = {n: tls_params(ports[f"{n}_https"], target_host, target_path) for n in servers}
            log(f"TLS negotiated: {results['tls_negotiated']}")

        proxies = ["ramjet"] + (["ramjet-base"] if args.baseline else []) + ["nginx", "haproxy"]
        tls_env = {"LD_PRELOAD": shim, "BENCH_SNI": target_host}

        def url(name, tls=False):
            return f"{'https' if tls else 'http'}://127.0.0.1:{ports[name + ('_https' if tls else '_http')]}{target_path}"

        def section(key, targets, make_run, alternate=False):
            log(f"== section {key}: {args.rounds} rounds x {len(targets)} targets x {args.duration}s")
            for t in targets:  # warm-up: pools, caches, page faults; not measured
                if args.warmup:
                    run_wrk(args, *make_run(t, warm=True), duration=args.warmup, label=f"warmup {t}")
            rows = {t: [] for t in targets}
            for r in range(args.rounds):
                log(f" round {r + 1}/{args.rounds}")
                # Alternating the order cancels a drift of foreign load within a round.
                order = targets[::-1] if alternate and r % 2 else targets
                for t in order:
                    rows[t].append(make_run(t, warm=False))
            results["sections"][key] = {"rounds": rows, "summary": summarize(rows, targets)}
            save(results, out_dir)

        # -- plain HTTP keep-alive
        if "http" in args.sections:
            def run_http(t, warm):
                u = f"http://127.0.0.1:{ports['backend']}{target_path}" if t == "backend" else url(t)
                if warm:
                    return (u, target_host)
                return measure(args, servers.get(t, backend), backend, u, target_host, label=f"http {t}")
            section("http", ["backend"] + proxies, run_http)
            s = results["sections"]["http"]["summary"]
            s["floor_cpu_us_per_req"] = 1.8 * s["backend"]["cpu_us_per_req"]

        # -- a new connection per request (Connection: close), plain HTTP: ramjet against nginx, the same
        # proxies, routes and backend as the keep-alive section
        if "close" in args.sections:
            close_targets = ["ramjet"] + (["ramjet-base"] if args.baseline else []) + ["nginx"]

            def run_close(t, warm):
                if warm:
                    return (url(t), target_host, ("Connection: close",))
                x0 = tcp_ext()
                res = measure(args, servers[t], backend, url(t), target_host, ("Connection: close",),
                              label=f"close {t}")
                x1 = tcp_ext()
                # who holds the TIME_WAIT of the connections (the side that closed first), and whether
                # connects reused ports still in TIME_WAIT (net.ipv4.tcp_tw_reuse)
                res["time_wait_end"] = tcp_sockets()[1]
                res["time_wait_server"], res["time_wait_client"] = time_wait_sides(ports[f"{t}_http"])
                for k, name in (("TWRecycled", "tw_recycled"), ("TCPTimeWaitOverflow", "tw_overflow"),
                                ("ListenOverflows", "listen_overflows")):
                    res[name] = x1.get(k, 0) - x0.get(k, 0)
                log(f"  {'':<28} TIME_WAIT at the end {res['time_wait_end']} (server end {res['time_wait_server']}, "
                    f"client end {res['time_wait_client']}); TWRecycled {res['tw_recycled']}, TW overflow "
                    f"{res['tw_overflow']}, listen overflows {res['listen_overflows']}")
                return res
            section("close", close_targets, run_close, alternate=True)
            sysctl = {}
            for k in ("ip_local_port_range", "tcp_tw_reuse", "tcp_max_tw_buckets", "tcp_fin_timeout", "tcp_timestamps"):
                try:
                    with open(f"/proc/sys/net/ipv4/{k}") as f:
                        sysctl[k] = " ".join(f.read().split())
                except OSError:
                    sysctl[k] = "?"
            results["close_config"] = {"targets": close_targets, "sysctl": sysctl}

        # -- a canary's weighted pick: the same ramjet, a plain route against a split one
        croutes = f"{d}/ramjet-canary-routes.yaml"
        write_canary_routes(croutes, hosts, target_i, ports["backend"], cert, key)
        canary_hosts = {"plain": target_host, "canary": f"canary.{DOMAIN}"}
        if "canary" in args.sections:
            rc = start_ramjet(args, "ramjet-canary", croutes, d, ports["ramjet-canary_http"],
                              ports["ramjet-canary_https"], ports["ramjet-canary_admin"], cpus=args.proxy_cpus)
            canary_server = Server("ramjet-canary", rc, [ports["ramjet-canary_http"]], worker_prefix="ramjet-worker")
            for h in canary_hosts.values():
                check_route("ramjet-canary", ports["ramjet-canary_http"], h, target_path)

            def run_canary(t, warm):
                if warm:
                    return (url("ramjet-canary"), canary_hosts[t])
                return measure(args, canary_server, backend, url("ramjet-canary"), canary_hosts[t],
                               label=f"canary {t}")
            section("canary", ["plain", "canary"], run_canary, alternate=True)
            PROCS.stop(rc)

        # -- a mirror that is down or slow, against no mirror: the same ramjet, three routes
        if "mirror" in args.sections:
            slow_py = f"{d}/slow_mirror.py"
            with open(slow_py, "w") as f:
                f.write(SLOW_MIRROR)
            slow = PROCS.start("slow-mirror", taskset(args.load_cpus) + [sys.executable, slow_py,
                               str(ports["mirror-slow"]), str(args.mirror_sleep)], stderr_path=f"{d}/slow-mirror.stderr")
            wait_port(ports["mirror-slow"], slow, "slow-mirror")
            mroutes = f"{d}/ramjet-mirror-routes.yaml"
            write_ramjet_routes(mroutes, hosts, ports["backend"], cert, key)
            with open(mroutes) as f:
                text = f.read()
            # nothing listens on the mirror-down port (checked free at the start): every copy is refused
            mirror_hosts = {"plain": f"plain.{DOMAIN}", "mirror-down": f"mirror-down.{DOMAIN}",
                            "mirror-slow": f"mirror-slow.{DOMAIN}"}
            extra = (f"  mdown: {{ endpoints: [\"127.0.0.1:{ports['mirror-down']}\"] }}\n"
                     f"  mslow: {{ endpoints: [\"127.0.0.1:{ports['mirror-slow']}\"] }}\n"
                     f"routes:\n"
                     f"  - {{ host: {mirror_hosts['plain']}, path: /p7, pathType: Prefix, backend: b{target_i} }}\n"
                     f"  - {{ host: {mirror_hosts['mirror-down']}, path: /p7, pathType: Prefix, backend: b{target_i}, "
                     f"mirror: {{ backend: mdown, percent: 100 }} }}\n"
                     f"  - {{ host: {mirror_hosts['mirror-slow']}, path: /p7, pathType: Prefix, backend: b{target_i}, "
                     f"mirror: {{ backend: mslow, percent: 100 }} }}\n")
            text = text.replace("routes:\n", extra, 1)
            with open(mroutes, "w") as f:
                f.write(text)
            rm = start_ramjet(args, "ramjet-mirror", mroutes, d, ports["ramjet-mirror_http"],
                              ports["ramjet-mirror_https"], ports["ramjet-mirror_admin"], cpus=args.proxy_cpus)
            mirror_server = Server("ramjet-mirror", rm, [ports["ramjet-mirror_http"]], worker_prefix="ramjet-worker")
            madmin = ports["ramjet-mirror_admin"]
            for h in mirror_hosts.values():
                check_route("ramjet-mirror", ports["ramjet-mirror_http"], h, target_path)
            time.sleep(args.mirror_sleep + 1)  # the checks' copies to the slow mirror end first

            slow_pending = []  # the slow mirror's warm-up left copies in flight

            def run_mirror(t, warm):
                if warm:
                    if t == "mirror-slow":
                        slow_pending.append(True)
                    return (url("ramjet-mirror"), mirror_hosts[t])
                if slow_pending:
                    time.sleep(args.mirror_sleep + 1)
                    slow_pending.clear()
                before = ramjet_mirror_counts(madmin)
                res = measure(args, mirror_server, backend, url("ramjet-mirror"), mirror_hosts[t],
                              label=f"mirror {t}")
                if t == "mirror-slow":
                    # the copies still in flight end (answered or timed out) before the next target runs,
                    # so they are counted here and cost the next run nothing
                    time.sleep(args.mirror_sleep + 1)
                after = ramjet_mirror_counts(madmin)
                res["mirror_sent"] = after["sent"] - before["sent"]
                res["mirror_dropped"] = after["dropped"] - before["dropped"]
                log(f"  {'':<28} copies sent {res['mirror_sent']}, dropped {res['mirror_dropped']}")
                return res
            section("mirror", ["plain", "mirror-down", "mirror-slow"], run_mirror, alternate=True)
            results["mirror_counts_total"] = ramjet_mirror_counts(madmin)
            results["mirror_config"] = {"sleep_s": args.mirror_sleep, "down_port": ports["mirror-down"],
                                        "slow_port": ports["mirror-slow"]}
            PROCS.stop(rm)
            PROCS.stop(slow)
            with open(f"{d}/slow-mirror.stderr", errors="replace") as f:
                m = re.search(r"SLOWMIRROR connections=(\d+) requests=(\d+)", f.read())
            results["slow_mirror_seen"] = {"connections": int(m.group(1)), "requests": int(m.group(2))} if m else None

        # -- instructions per request (callgrind) on the plain and the canary route
        if "instructions" in args.sections:
            lo, hi = args.insn_base, args.insn_base + args.insn_requests
            insn_hosts = {"plain": f"direct.{DOMAIN}", "canary": f"canary.{DOMAIN}"}  # names of equal length
            # --insn-tls: the same requests over HTTPS keep-alive (the default certificate answers every name)
            insn_tls_args = ("--default-certificate", cert, "--default-certificate-key", key) if args.insn_tls else ()
            runs = []
            for r in range(args.insn_rounds):
                for t in ("plain", "canary"):
                    for n in (lo, hi):
                        tag = f"{t}-{n}-{r}"
                        prefix = f"{d}/callgrind-{tag}.out"
                        wrapper = VALGRIND + ["--tool=callgrind", "--separate-threads=yes",
                                   f"--callgrind-out-file={prefix}.%p"]
                        t0 = time.monotonic()
                        p = start_ramjet(args, f"ramjet-insn-{tag}", croutes, d, ports["ramjet-insn_http"],
                                         ports["ramjet-insn_https"], ports["ramjet-insn_admin"], cpus=args.proxy_cpus,
                                         wrapper=wrapper, io_driver=args.insn_driver, extra=insn_tls_args)
                        started = time.monotonic() - t0
                        # one checked request in every run (so it cancels in the difference), then exactly n
                        check_route(f"ramjet-insn-{tag}", ports["ramjet-insn_http"], insn_hosts[t], target_path)
                        t1 = time.monotonic()
                        if args.insn_tls:
                            run_h1_count(args, ports["ramjet-insn_https"], insn_hosts[t], n, label=tag, scheme="https")
                        else:
                            run_h1_count(args, ports["ramjet-insn_http"], insn_hosts[t], n, label=tag)
                        load_s = time.monotonic() - t1
                        PROCS.stop(p, timeout=600)
                        threads = callgrind_threads(prefix)
                        policy = {src: sum(v for th in threads if th[1] for f, v in th[2].items()
                                           if f and f.endswith(src)) for src in POLICY_SOURCES}
                        row = {"target": t, "requests": n, "round": r,
                               "worker_ir": sum(th[0] for th in threads if th[1]),
                               "process_ir": sum(th[0] for th in threads), "threads": len(threads),
                               "worker_threads": sum(1 for th in threads if th[1]),
                               "policy_ir": sum(policy.values()), "policy_ir_by_file": policy,
                               "start_s": started, "load_s": load_s}
                        if not args.keep_temp:
                            for path in glob.glob(prefix + "*"):
                                os.unlink(path)
                        runs.append(row)
                        log(f"  callgrind {tag}: worker Ir {row['worker_ir']:,}, process Ir {row['process_ir']:,} "
                            f"({row['threads']} threads, {row['worker_threads']} worker), load {load_s:.1f}s")
                        save(dict(results, instructions_runs=runs), out_dir)
            summary = {}
            for t in ("plain", "canary"):
                run = {(x["requests"], x["round"]): x for x in runs if x["target"] == t}
                pairs = [(run[(lo, r)], run[(hi, r)]) for r in range(args.insn_rounds)]
                per = {k: [(b[f"{k}_ir"] - a[f"{k}_ir"]) / (hi - lo) for a, b in pairs]
                       for k in ("worker", "process", "policy")}
                summary[t] = {f"{k}_ir_per_req": statistics.median(v) for k, v in per.items()}
                summary[t].update({f"{k}_ir_per_req_rounds": v for k, v in per.items()})
                summary[t]["policy_ir_per_req_by_file"] = {
                    src: statistics.median((b["policy_ir_by_file"][src] - a["policy_ir_by_file"][src]) / (hi - lo)
                                           for a, b in pairs) for src in POLICY_SOURCES}
            results["sections"]["instructions"] = {
                "runs": runs, "summary": summary,
                "config": {"low": lo, "high": hi, "connections": args.insn_connections, "driver": args.insn_driver,
                           "tls": args.insn_tls,
                           "rounds": args.insn_rounds}}
            save(results, out_dir)

        # -- the migration example of docs/gateway-api.md as Ingresses and as one HTTPRoute, per request kind
        if "gateway" in args.sections:
            kinds = args.gw_kinds
            sides = ("ingress", "httproute")
            gb = start_nginx("gw-backends", write_gw_backend_conf(d, ports), d, ports["gw-stable"], args.load_cpus)
            gw_backend = Server("gw-backends", gb, [])
            gw_dirs = write_gw_manifests(d, ports)
            gw = {"config": {"host": GW_HOST, "kinds": {k: {"path": GW_KINDS[k][0], "headers": list(GW_KINDS[k][1]),
                                                            "status": GW_KINDS[k][2]} for k in kinds},
                             "manifests": {side: {os.path.basename(f): open(f).read()
                                                  for f in sorted(glob.glob(f"{gw_dirs[side]}/*.yaml"))}
                                           for side in sides}}}
            if "wrk" in args.gw_parts:
                gw_srv = {}
                for side, tag in zip(sides, ("gwi", "gwh")):
                    p = start_ramjet(args, f"ramjet-{tag}", gw_dirs[side], d, ports[f"ramjet-{tag}_http"],
                                     ports[f"ramjet-{tag}_https"], ports[f"ramjet-{tag}_admin"], cpus=args.proxy_cpus,
                                     source="--manifests")
                    gw_srv[side] = (Server(f"ramjet-{tag}", p, [ports[f"ramjet-{tag}_http"]],
                                           worker_prefix="ramjet-worker"), ports[f"ramjet-{tag}_http"],
                                    ports[f"ramjet-{tag}_admin"])
                gw["checks"] = {f"{side} {k}": gw_check(f"ramjet {side}", gw_srv[side][1], k)
                                for side in sides for k in kinds}
                log(f"gateway checks: {gw['checks']}")

                def run_gw(t, warm):
                    side, kind = t.split(" ")
                    path, headers = GW_KINDS[kind][:2]
                    srv, port, admin = gw_srv[side]
                    u = f"http://127.0.0.1:{port}{path}"
                    if warm:
                        return (u, GW_HOST, headers)
                    before = ramjet_mirror_counts(admin)
                    res = measure(args, srv, gw_backend, u, GW_HOST, extra_headers=headers, label=f"gateway {t}")
                    after = ramjet_mirror_counts(admin)
                    res["mirror_sent"] = after["sent"] - before["sent"]
                    res["mirror_dropped"] = after["dropped"] - before["dropped"]
                    return res
                # each kind's two sides next to each other; the order flips every round
                section("gateway", [f"{side} {k}" for k in kinds for side in sides], run_gw, alternate=True)
                gw.update(results["sections"]["gateway"])
                for srv, _, _ in gw_srv.values():
                    PROCS.stop(srv.proc)
            results["sections"]["gateway"] = gw
            if "insn" in args.gw_parts:
                lo, hi = args.insn_base, args.insn_base + args.insn_requests
                log(f"== section gateway, instructions: {args.insn_rounds} rounds x {len(kinds)} kinds x 2 sides "
                    f"x N = {lo:,} and {hi:,}")
                runs, fn_rows = [], {}
                for r in range(args.insn_rounds):
                    for kind in kinds:
                        path, headers, status = GW_KINDS[kind][:3]
                        for side in (sides if r % 2 == 0 else sides[::-1]):
                            for n in (lo, hi):
                                tag = f"{side}-{kind}-{n}-{r}"
                                prefix = f"{d}/callgrind-gw-{tag}.out"
                                wrapper = VALGRIND + ["--tool=callgrind", "--separate-threads=yes",
                                           f"--callgrind-out-file={prefix}.%p"]
                                t0 = time.monotonic()
                                p = start_ramjet(args, f"ramjet-gwinsn-{tag}", gw_dirs[side], d,
                                                 ports["ramjet-gwinsn_http"], ports["ramjet-gwinsn_https"],
                                                 ports["ramjet-gwinsn_admin"], cpus=args.proxy_cpus, wrapper=wrapper,
                                                 io_driver=args.insn_driver, source="--manifests")
                                started = time.monotonic() - t0
                                # one checked request in every run (it cancels in the difference), then exactly n
                                gw_check(f"ramjet-gwinsn-{tag}", ports["ramjet-gwinsn_http"], kind)
                                t1 = time.monotonic()
                                run_h1_count(args, ports["ramjet-gwinsn_http"], GW_HOST, n, label=tag, path=path,
                                             headers=headers, status=status, host_port=False)
                                load_s = time.monotonic() - t1
                                mirrored = ramjet_mirror_counts(ports["ramjet-gwinsn_admin"])
                                PROCS.stop(p, timeout=600)
                                threads = callgrind_threads(prefix)
                                worker = [th for th in threads if th[1]]
                                files, fns = {}, {}
                                for th in worker:
                                    for k, v in th[2].items():
                                        files[k] = files.get(k, 0) + v
                                    for k, v in th[3].items():
                                        fns[k] = fns.get(k, 0) + v
                                policy = {src: sum(v for f, v in files.items() if f and f.endswith(src))
                                          for src in POLICY_SOURCES}
                                row = {"side": side, "kind": kind, "requests": n, "round": r,
                                       "worker_ir": sum(th[0] for th in worker),
                                       "process_ir": sum(th[0] for th in threads), "threads": len(threads),
                                       "worker_threads": len(worker), "policy_ir": sum(policy.values()),
                                       "policy_ir_by_file": policy, "mirror_sent": mirrored["sent"],
                                       "mirror_dropped": mirrored["dropped"], "start_s": started, "load_s": load_s}
                                fn_rows[(side, kind, n, r)] = (files, fns)
                                if not args.keep_temp:
                                    for f in glob.glob(prefix + "*"):
                                        os.unlink(f)
                                runs.append(row)
                                log(f"  callgrind gateway {tag}: worker Ir {row['worker_ir']:,}, copies mirrored "
                                    f"{row['mirror_sent']}, start {started:.1f}s, load {load_s:.1f}s")
                                save(dict(results, gateway_instructions_runs=runs), out_dir)
                gw["instructions"] = gw_insn_summary(runs, fn_rows, kinds, sides, lo, hi, args.insn_rounds)
                gw["instructions"]["config"] = {"low": lo, "high": hi, "connections": args.insn_connections,
                                                "driver": args.insn_driver, "rounds": args.insn_rounds}
            PROCS.stop(gb)
            save(results, out_dir)

        # -- the access log on and off, ramjet against nginx (plain HTTP keep-alive)
        if "accesslog" in args.sections:
            rl = start_ramjet(args, "ramjet-log", routes, d, ports["ramjet-log_http"], ports["ramjet-log_https"],
                              ports["ramjet-log_admin"], cpus=args.proxy_cpus,
                              extra=("--access-log", f"{d}/ramjet-access.log", "--access-log-format", "json"))
            log_servers = {"ramjet-log": Server("ramjet-log", rl, [ports["ramjet-log_http"]],
                                                worker_prefix="ramjet-worker")}
            nlconf = write_nginx_proxy_conf(d, "nginx-log", hosts, ports["nginx-log_http"], ports["nginx-log_https"],
                                            ports["backend"], cert, key, access_log=f"{d}/nginx-access.log")
            nl = start_nginx("nginx-log", nlconf, d, ports["nginx-log_http"], args.proxy_cpus)
            log_servers["nginx-log"] = Server("nginx-log", nl, [ports["nginx-log_http"]])
            for name in log_servers:
                check_route(name, ports[f"{name}_http"], target_host, target_path)
            every = {**servers, **log_servers}

            def run_log(t, warm):
                if warm:
                    return (url(t), target_host)
                return measure(args, every[t], backend, url(t), target_host, label=f"accesslog {t}")
            section("accesslog", ["ramjet", "ramjet-log", "nginx", "nginx-log"], run_log)
            for name in ("ramjet", "nginx"):
                path = f"{d}/{name}-access.log"
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        results.setdefault("access_log_lines", {})[name] = sum(1 for _ in f)
            dropped = admin_request(ports["ramjet-log_admin"], "GET", "/metrics")[1].decode()
            results["access_log_dropped"] = next(
                (float(line.split()[1]) for line in dropped.splitlines()
                 if line.startswith("ramjet_access_log_dropped_total ")), None)
            for srv in log_servers.values():
                PROCS.stop(srv.proc)

        if args.profile and "ramjet" in servers:
            results["profile"] = profile_ramjet(args, servers["ramjet"], url("ramjet"), target_host, d, out_dir)

        # -- HTTPS keep-alive
        if "tls" in args.sections:
            def run_tls(t, warm):
                if warm:
                    return (url(t, True), target_host, (), tls_env)
                return measure(args, servers[t], backend, url(t, True), target_host, env_extra=tls_env,
                               label=f"https keep-alive {t}")
            section("tls", proxies, run_tls)

        # -- new connections over HTTPS: full handshakes, and (optionally) resumed ones
        for hs_section, resume in (("handshake", False), ("resume", True)):
            if hs_section not in args.sections:
                continue
            env = dict(tls_env) if resume else dict(tls_env, BENCH_NO_RESUME="1")

            def run_hs(t, warm, env=env, label=hs_section):
                if warm:
                    return (url(t, True), target_host, ("Connection: close",), env)
                return measure(args, servers[t], backend, url(t, True), target_host, ("Connection: close",),
                               env, label=f"{label} {t}")
            section(hs_section, proxies, run_hs)

        results["rss_mb"] = {n: s.rss_mb() for n, s in servers.items()}
        results["rss_mb"]["backend"] = backend.rss_mb()
        for s in list(servers.values()):
            PROCS.stop(s.proc)
        servers.clear()

        # -- HTTP/2 clients: h2c by prior knowledge and h2 over TLS, proxied over HTTP/1.1
        if "h2" in args.sections:
            rj = start_ramjet(args, "ramjet-h2", routes, d, ports["ramjet-h2_http"], ports["ramjet-h2_https"],
                              ports["ramjet-h2_admin"], cpus=args.proxy_cpus)
            nconf = write_nginx_proxy_conf(d, "nginx-h2", hosts, ports["nginx-h2_http"], ports["nginx-h2_https"],
                                           ports["backend"], cert, key, http2=True,
                                           keepalive=args.nginx_keepalive)
            ng = start_nginx("nginx-h2", nconf, d, ports["nginx-h2_http"], args.proxy_cpus)
            h2srv = {"ramjet": Server("ramjet", rj, [], worker_prefix="ramjet-worker"),
                     "nginx": Server("nginx", ng, [])}
            prefix = {"ramjet": "ramjet-h2", "nginx": "nginx-h2"}

            def run_h2(t, warm):
                proxy, kind = t.split(" ", 1)
                tls = kind == "h2 tls"
                port = ports[prefix[proxy] + ("_https" if tls else "_http")]
                u = f"{'https' if tls else 'http'}://127.0.0.1:{port}{target_path}"
                if warm:
                    return (u, target_host)
                return measure_h2(args, h2srv[proxy], backend, u, target_host, label=t)

            # Idle memory first, on fresh processes: after load, the allocators reuse freed memory and
            # new connections would look free.
            results["h2_idle_kib"] = {
                p: idle_h2_memory(h2srv[p], ports[prefix[p] + "_http"], target_host, args.h2_idle)
                for p in ("ramjet", "nginx")}
            log(f"idle HTTP/2 connection: {results['h2_idle_kib']} KiB each")
            h2_targets = ["ramjet h2c", "nginx h2c", "ramjet h2 tls", "nginx h2 tls"]
            log(f"== section h2: {args.rounds} rounds x {len(h2_targets)} targets x {args.duration}s")
            for t in h2_targets:
                if args.warmup:
                    u, hh = run_h2(t, warm=True)
                    run_h2load(argparse.Namespace(**dict(vars(args), duration=args.warmup)), u, hh, f"warmup {t}")
            rows = {t: [] for t in h2_targets}
            for r in range(args.rounds):
                log(f" round {r + 1}/{args.rounds}")
                for t in h2_targets:
                    rows[t].append(run_h2(t, warm=False))
            results["sections"]["h2"] = {"rounds": rows, "summary": summarize(rows, h2_targets)}
            results["rss_mb_h2"] = {p: h2srv[p].rss_mb() for p in h2srv}
            save(results, out_dir)
            PROCS.stop(rj)
            PROCS.stop(ng)

        # -- memory of idle keep-alive client connections: fresh processes (after load, the allocators
        # reuse freed memory and new connections would look free), one worker each
        if "idle" in args.sections:
            n = args.idle_connections
            iroutes = f"{d}/ramjet-idle-routes.yaml"
            with open(iroutes, "w") as f:
                f.write(IDLE_ROUTES)
            idle_srv = {}
            tls = args.idle_tls
            scheme = "_https" if tls else "_http"
            tls_args = ("--default-certificate", cert, "--default-certificate-key", key) if tls else ()
            for i, after in enumerate(args.idle_release_after):
                tag = f"ramjet-idle{i}"
                p = start_ramjet(args, tag, iroutes, d, ports[f"{tag}_http"], ports[f"{tag}_https"],
                                 ports[f"{tag}_admin"], cpus=args.proxy_cpus,
                                 extra=("--keepalive-timeout", "600s", "--idle-release-after", after, *tls_args))
                idle_srv[f"ramjet, release after {after}"] = (Server(tag, p, [ports[f"{tag}{scheme}"]]),
                                                              ports[f"{tag}{scheme}"], tls)
            nport = ports[f"nginx-idle{scheme}"]
            iconf = write_idle_nginx_conf(d, nport, n, (cert, key) if tls else None)
            ing = start_nginx("nginx-idle", iconf, d, nport, args.proxy_cpus)
            idle_srv["nginx"] = (Server("nginx-idle", ing, [nport]), nport, tls)
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            if limit != resource.RLIM_INFINITY and n * len(idle_srv) + 256 > limit:
                raise RuntimeError(f"idle section: {n} x {len(idle_srv)} client ends need more than the open file "
                                   f"limit {limit} (ulimit -Hn); lower --idle-connections")
            log(f"== section idle: {args.idle_rounds} rounds x {n} idle connections to each of {len(idle_srv)} "
                f"servers at once ({args.idle_settle:g}s idle, {args.idle_after_close:g}s after closing)")
            results["sections"]["idle"] = {
                "servers": idle_rounds(idle_srv, n, args.idle_rounds, args.idle_settle, args.idle_after_close),
                "config": {"connections": n, "rounds": args.idle_rounds, "settle_s": args.idle_settle, "tls": tls,
                           "after_close_s": args.idle_after_close, "release_after": args.idle_release_after}}
            save(results, out_dir)
            for srv, _, _ in idle_srv.values():
                PROCS.stop(srv.proc)

        def churn_routes():
            """The --churn-routes routes file (written once) of the churn and pins sections, its host count,
            and the host the load asks for."""
            chosts = args.churn_routes // ROUTES_PER_HOST
            path = f"{d}/ramjet-routes-{args.churn_routes}.yaml"
            if not os.path.exists(path):
                write_ramjet_routes(path, chosts, ports["backend"], cert, key)
            return chosts, host(min(420, chosts - 1)), path

        # -- churn under load
        if "churn" in args.sections:
            chosts, ctarget, croutes = churn_routes()
            t0 = time.monotonic()
            rj = start_ramjet(args, "ramjet10k", croutes, d, ports["ramjet10k_http"], ports["ramjet10k_https"],
                              ports["ramjet10k_admin"], cpus=args.proxy_cpus)
            results["ramjet_churn_start_s"] = time.monotonic() - t0
            _, gens = admin_request(ports["ramjet10k_admin"], "GET", "/admin/generations")
            generation = json.loads(gens)["newest"]
            nhosts = args.churn_vhosts
            # notice level: the master logs each reload ("reconfiguring"), so reloads can be counted;
            # nothing at that level is per request
            # plain HTTP only (what the churn runs use): the lightest configuration for nginx to reload
            nconf = write_nginx_proxy_conf(d, "nginx10k", nhosts, ports["nginx10k_http"], None,
                                           ports["backend"], cert, key, error_level="notice")
            t0 = time.monotonic()
            ng = start_nginx("nginx10k", nconf, d, ports["nginx10k_http"], args.proxy_cpus)
            results["nginx_churn_start_s"] = time.monotonic() - t0
            nhost = host(min(420, nhosts - 1))
            check_route("ramjet10k", ports["ramjet10k_http"], ctarget, target_path)
            check_route("nginx10k", ports["nginx10k_http"], nhost, target_path)
            srv = {"ramjet": Server("ramjet", rj, [], worker_prefix="ramjet-worker"), "nginx": Server("nginx", ng, [])}
            admin = ports["ramjet10k_admin"]
            n_pub = int(args.publish_rate * args.duration)
            n_rel = int(args.reload_rate * args.duration)

            def run_churn(t, warm):
                proxy, churn = t.split(" ", 1)
                u = f"http://127.0.0.1:{ports[proxy + '10k_http']}{target_path}"
                hh = ctarget if proxy == "ramjet" else nhost
                if warm:
                    return (u, hh)
                during = None
                if churn == "churn" and proxy == "ramjet":
                    during = lambda: Churner(1.0 / args.publish_rate, ramjet_churn(admin, generation), n_pub,
                                             collect=lambda: ramjet_publishes(admin))
                elif churn == "churn":
                    during = lambda: Churner(1.0 / args.reload_rate, nginx_reload(nconf, d, args.nginx_reload, ng.pid), n_rel,
                                             collect=lambda: nginx_reconfigurations(f"{d}/nginx10k.error.log"))
                return measure(args, srv[proxy], backend, u, hh, label=f"{t}", during=during)
            section("churn", ["ramjet steady", "ramjet churn", "nginx steady", "nginx churn"], run_churn)
            admin_request(admin, "DELETE", "/admin/rollback")  # leave it unpinned
            results["rss_mb_churn"] = {"ramjet": srv["ramjet"].rss_mb(), "nginx": srv["nginx"].rss_mb()}
            results["churn_config"] = {"ramjet_routes": args.churn_routes, "ramjet_hosts": chosts,
                                       "nginx_vhosts": nhosts, "nginx_locations": nhosts * ROUTES_PER_HOST,
                                       "publishes_per_run": n_pub, "reloads_per_run": n_rel,
                                       "generation": generation}
            PROCS.stop(rj)
            PROCS.stop(ng)

        # -- pins and releases under load: ramjet with --churn-routes routes, wrk against one route, quiet
        # against pinning and releasing through the admin API at --pin-rate
        if "pins" in args.sections:
            chosts, ctarget, croutes = churn_routes()
            rp = start_ramjet(args, "ramjet-pins", croutes, d, ports["ramjet-pins_http"], ports["ramjet-pins_https"],
                              ports["ramjet-pins_admin"], cpus=args.proxy_cpus)
            padmin = ports["ramjet-pins_admin"]
            check_route("ramjet-pins", ports["ramjet-pins_http"], ctarget, target_path)
            st, gens = admin_request(padmin, "GET", "/admin/generations")
            if st != 200:
                raise RuntimeError(f"GET /admin/generations answered {st}: {gens[:200]!r}")
            pin_generation = json.loads(gens)["serving"]
            pin_srv = Server("ramjet-pins", rp, [ports["ramjet-pins_http"]], worker_prefix="ramjet-worker")
            n_ops = max(1, int(round(args.pin_rate * args.duration)))
            pu = url("ramjet-pins")

            def run_pins(t, warm):
                if warm:
                    return (pu, ctarget)
                counts, during = {}, None
                if t == "pinned":
                    during = lambda: Churner(1.0 / args.pin_rate, ramjet_churn(padmin, pin_generation, counts), n_ops,
                                             collect=lambda: ramjet_publishes(padmin))
                elif t == "admin-reads":
                    during = lambda: Churner(1.0 / args.pin_rate, admin_reads(padmin, counts), n_ops)
                ns0, t0 = threads_run_ns(rp.pid), time.monotonic()
                res = measure(args, pin_srv, backend, pu, ctarget, label=f"pins {t}", during=during)
                ns1, res["threads_wall_s"] = threads_run_ns(rp.pid), time.monotonic() - t0
                res["threads_cpu_ms"] = {k: (v - ns0.get(k, 0)) / 1e6 for k, v in ns1.items()}
                if t == "pinned":
                    # every run starts unpinned (an odd count ends on a pin); not counted
                    st, body = admin_request(padmin, "DELETE", "/admin/rollback")
                    if st != 200:
                        raise RuntimeError(f"DELETE /admin/rollback answered {st}: {body[:200]!r}")
                    res["pins"], res["releases"] = counts.get("pin", 0), counts.get("release", 0)
                    res["pin_ops_sent"] = n_ops
                return res
            controls = ["quiet-again", "admin-reads"] if args.pins_controls else []
            section("pins", ["quiet", "pinned"] + controls, run_pins, alternate=True)
            sec = results["sections"]["pins"]

            def extra_ms(pr, q, names):
                """CPU ms of the threads `names` in the pinned run beyond the quiet run's rate per second."""
                def ms(r):
                    return sum(v for k, v in r["threads_cpu_ms"].items() if k in names)
                return ms(pr) - ms(q) * ratio(pr["threads_wall_s"], q["threads_wall_s"])

            per_round = []
            for q, pr in zip(sec["rounds"]["quiet"], sec["rounds"]["pinned"]):
                ops = pr["pins"] + pr["releases"]
                others = [k for k in set(pr["threads_cpu_ms"]) | set(q["threads_cpu_ms"])
                          if not k.startswith("ramjet-worker")]
                # whole process, beyond what the pinned run's requests cost at the quiet run's CPU per
                # request: the per-request noise between two runs (tenths of a µs times the requests) is
                # larger than the pins' cost, so this is a bound at best; the thread figures are the measure
                extra = pr["cpu_s"] - q["cpu_us_per_req"] * pr["requests"] / 1e6
                per_round.append({
                    "p99_ratio": ratio(pr["p99_us"], q["p99_us"]), "rps_ratio": ratio(pr["rps"], q["rps"]),
                    "ops": ops, "cpu_us_per_op": extra * 1e6 / ops if ops else float("nan"),
                    "control_cpu_us_per_op": extra_ms(pr, q, ["ramjet-control"]) * 1e3 / ops if ops else float("nan"),
                    "outside_workers_cpu_us_per_op": extra_ms(pr, q, others) * 1e3 / ops if ops else float("nan"),
                    "foreign_quiet": q["foreign_cpus"], "foreign_pinned": pr["foreign_cpus"]})
            for i, q in enumerate(sec["rounds"]["quiet"]):
                for t in controls:
                    per_round[i][f"{t}_p99_ratio"] = ratio(sec["rounds"][t][i]["p99_us"], q["p99_us"])
            sec["per_round"] = per_round
            # The hypervisor's steal moves p99 by up to 10 x between identical runs on a shared VM (the
            # controls show it): the p99 of the runs it left alone, per target, is the figure to compare.
            calm = {t: [x["p99_us"] for x in sec["rounds"][t] if x["steal_cpus"] <= CALM_STEAL] for t in sec["rounds"]}
            sec["calm"] = {t: {"runs": len(v), "p99_us": statistics.median(v) if v else float("nan")}
                           for t, v in calm.items()}
            sec["summary"]["pinned"]["calm_p99_ratio"] = ratio(sec["calm"]["pinned"]["p99_us"],
                                                               sec["calm"]["quiet"]["p99_us"])
            sec["summary"]["pinned"].update({
                k: statistics.median(x[k] for x in per_round)
                for k in ("p99_ratio", "rps_ratio", "cpu_us_per_op", "control_cpu_us_per_op",
                          "outside_workers_cpu_us_per_op") + tuple(f"{t}_p99_ratio" for t in controls)})
            results["pins_config"] = {"routes": args.churn_routes, "hosts": chosts, "target_host": ctarget,
                                      "generation": pin_generation, "rate": args.pin_rate, "ops_per_run": n_ops}
            results["rss_mb_pins"] = pin_srv.rss_mb()
            save(results, out_dir)
            PROCS.stop(rp)

        results["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        save(results, out_dir)
        report = render(results, args)
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(report)
        print(report)
        log(f"done: {out_dir}/results.md and results.json")
    except KeyboardInterrupt:
        log("interrupted: stopping everything this harness started")
        return 130
    finally:
        PROCS.stop_all()
        if not args.keep_temp:
            shutil.rmtree(d, ignore_errors=True)
        else:
            log(f"kept {d}")
    return 0


def profile_ramjet(args, server, u, target_host, d, out_dir):
    if not shutil.which("perf"):
        log("perf is not installed (apt-get install linux-perf): no profile")
        return None
    data = os.path.join(out_dir, "ramjet.perf.data")
    pr = PROCS.start("perf", ["perf", "record", "-e", "cpu-clock", "-F", "4999", "-g", "-p",
                              str(server.proc.pid), "-o", data], stop_signal=signal.SIGINT,
                     stderr_path=f"{d}/perf.stderr")
    time.sleep(0.5)
    run_wrk(args, u, target_host, label="perf")
    PROCS.stop(pr, timeout=60)
    with open(os.path.join(out_dir, "ramjet.perf.txt"), "w") as f:
        for sort in ("dso", "dso,symbol"):
            rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", sort, "--stdio",
                                  "-g", "none", "--percent-limit", "0.3"], capture_output=True, text=True, timeout=300)
            f.write(rep.stdout)
    log(f"profile: {out_dir}/ramjet.perf.txt")
    return os.path.join(out_dir, "ramjet.perf.txt")


def save(results, out_dir):
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)


def render_gateway(g, args):
    c = g["config"]
    kinds = list(c["kinds"])
    out = ["## The migration example as Ingresses and as one HTTPRoute (issue 19)", "",
           f"Two ramjets (--workers 1, --manifests), the same host ({c['host']}) and Services: the Ingress side is "
           "docs/gateway-api.md's Ingress pair (mirror-target; canary by header and weight 10) plus an Ingress with "
           "permanent-redirect for /old and one with rewrite-target for /api(/|$)(.*) (which puts the host's paths "
           "in regex mode); the HTTPRoute side is the example's HTTPRoute (header match, weights 90/10, "
           "RequestMirror, RequestRedirect, URLRewrite) with two changes that make it do what the Ingresses do: the "
           "header rule carries the mirror too (the primary Ingress's mirror-target covers the requests its canary "
           "serves), and no RequestHeaderModifier (the Ingresses cannot say it: configuration-snippet is refused). "
           "Request kinds: " + "; ".join(
               f"{k}: GET {v['path']}" + (f" with {', '.join(v['headers'])}" if v["headers"] else "")
               + f" ({v['status']})" for k, v in c["kinds"].items()) + ". The generated manifests are in results.json "
           "(sections.gateway.config.manifests).", ""]
    ins = g.get("instructions")
    if ins:
        ic, s, dif = ins["config"], ins["summary"], ins["differences"]
        out += ["### Instructions per request (callgrind, worker thread)", "",
                f"--io-driver {ic['driver']} under `valgrind --tool=callgrind --separate-threads=yes`; h2load --h1 "
                f"-c{ic['connections']} -m1 sends exactly N requests; per request = (Ir with N = {ic['high']:,} − Ir "
                f"with N = {ic['low']:,}) / {ic['high'] - ic['low']:,}, median of {ic['rounds']} round(s) (the sides' "
                "order flips every round). User space only.", "",
                "| kind | Ingress Ir/req (median, min–max) | HTTPRoute Ir/req (median, min–max) | HTTPRoute / Ingress "
                "(median of per-round ratios) | HTTPRoute − Ingress | policy source lines, Ingress / HTTPRoute | "
                "mirror copies per request, Ingress / HTTPRoute |", "|---|---|---|---|---|---|---|"]
        for k in kinds:
            a, b = s.get(f"ingress {k}"), s.get(f"httproute {k}")
            if not (a and b):
                continue
            ra, rb = a["worker_ir_per_req_rounds"], b["worker_ir_per_req_rounds"]
            out.append(f"| {k} | {a['worker_ir_per_req']:,.0f} ({min(ra):,.0f}–{max(ra):,.0f}) | "
                       f"{b['worker_ir_per_req']:,.0f} ({min(rb):,.0f}–{max(rb):,.0f}) | {dif[k]['ratio']:.4f} "
                       f"({dif[k]['paired_ratio']:.4f}) | {dif[k]['difference']:+,.0f} | "
                       f"{a['policy_ir_per_req']:,.1f} / {b['policy_ir_per_req']:,.1f} | "
                       f"{a['mirror_sent_per_req']:.2f} / {b['mirror_sent_per_req']:.2f} |")
        out += ["", f"Policy source lines: what callgrind books to {', '.join(POLICY_SOURCES)} (inlined code keeps "
                "its own file and line).", ""]
        for k in kinds:
            if k not in dif:
                continue
            rows = [x for x in dif[k]["top_fns"] if abs(x["difference"]) >= 2][:10]
            files = [x for x in dif[k]["top_files"] if abs(x["difference"]) >= 2][:6]
            out.append(f"{k}, the functions whose self cost per request differs most (HTTPRoute − Ingress, "
                       "instructions; medians over rounds): " + ("; ".join(
                           f"`{x['name'][:110]}` {x['difference']:+,.1f} ({x['ingress']:,.1f} → {x['httproute']:,.1f})"
                           for x in rows) or "none by 2 or more") + ". By source file: " + ("; ".join(
                           f"`{'/'.join(x['name'].split('/')[-3:])}` {x['difference']:+,.1f}" for x in files)
                           or "none by 2 or more") + ".")
            out.append("")
    if "summary" in g:
        s = g["summary"]
        targets = [f"{side} {k}" for k in kinds for side in ("ingress", "httproute")]
        out += ["### Whole proxy under wrk (HTTP/1.1 keep-alive)", "",
                f"wrk -t{args.threads} -c{args.connections} -d{args.duration}s per target, {args.rounds} rounds; in "
                "each round a kind's two sides run back to back and the order flips every round. CPU: the whole "
                "ramjet process; the worker thread's share beside it.", "",
                table(s, targets), "",
                ratio_table(g, [(f"httproute {k}", f"ingress {k}") for k in kinds],
                            ("rps", "cpu_us_per_req", "worker_cpu_us_per_req", "p99_us")), "",
                "Mirror copies per request (sent, dropped over the in-flight bound), summed over rounds: " + "; ".join(
                    f"{t} {ratio(s[t].get('mirror_sent', 0), s[t]['requests']):.2f}, "
                    f"{ratio(s[t].get('mirror_dropped', 0), s[t]['requests']):.3f}" for t in targets if t in s) + ".",
                ""]
    return out


def render(results, args):
    m = results.get("machine", {})
    out = [f"# Proxy benchmark — {m.get('date')}", ""]
    out.append(f"Machine: {m.get('nproc')} CPUs ({m.get('cpu')}), kernel {m.get('kernel')}, {m.get('os')}; "
               f"ramjet driver: {m.get('ramjet_driver')}; ramjet {m.get('ramjet_commit')}; {m.get('nginx')}; "
               f"{m.get('haproxy')}; {m.get('wrk')}; {m.get('openssl')}; load average at start "
               f"{' '.join(m.get('loadavg_start', []))}, at end {' '.join(m.get('loadavg_end', []))}.")
    out.append(f"wrk -t{args.threads} -c{args.connections} -d{args.duration}s, {args.rounds} interleaved rounds, "
               f"medians over rounds; {args.routes} routes per proxy ({args.routes // ROUTES_PER_HOST} hosts); "
               f"pinning: {'proxy on CPU 0, load and backend on the rest' if args.pin else 'none (ramjet pins its worker)'}.")
    out.append("")
    secs = results["sections"]
    if "http" in secs:
        s = secs["http"]["summary"]
        out += ["## HTTP/1.1 keep-alive", "", table(s, ["backend", "ramjet", "ramjet-base", "nginx", "haproxy"]), "",
                ratios(secs["http"], "ramjet", ["ramjet-base", "nginx", "haproxy"]), "",
                f"Floor (1.8 × the backend's {s['backend']['cpu_us_per_req']:.2f} µs/req): "
                f"{s['floor_cpu_us_per_req']:.2f} µs/req.", ""]
    if "accesslog" in secs:
        s = secs["accesslog"]["summary"]
        out += ["## Access log on and off (HTTP/1.1 keep-alive)", "",
                table(s, ["ramjet", "ramjet-log", "nginx", "nginx-log"]), "",
                ratios(secs["accesslog"], "ramjet-log", ["ramjet", "nginx-log"]), "",
                ratios(secs["accesslog"], "nginx-log", ["nginx"]), "",
                f"Records written: {results.get('access_log_lines')}; ramjet_access_log_dropped_total "
                f"{results.get('access_log_dropped')}.", ""]
    if "canary" in secs:
        s = secs["canary"]["summary"]
        out += ["## A canary's weighted pick (HTTP/1.1 keep-alive, one ramjet)", "",
                table(s, ["plain", "canary"]), "", ratios(secs["canary"], "canary", ["plain"]), ""]
    if "mirror" in secs:
        s = secs["mirror"]["summary"]
        mc = results.get("mirror_config", {})
        keys = ("p50_us", "p99_us", "cpu_us_per_req", "rps")
        out += ["## A mirror that is down or slow, against no mirror (HTTP/1.1 keep-alive, one ramjet)", "",
                f"mirror-down: every request copied (percent 100) to 127.0.0.1:{mc.get('down_port')}, where nothing "
                f"listens; mirror-slow: copied to a server that reads the request and answers after "
                f"{mc.get('sleep_s')} s. Same backend for all three routes.", "",
                table(s, ["plain", "mirror-down", "mirror-slow"]), "",
                ratio_table(secs["mirror"], [("mirror-down", "plain"), ("mirror-slow", "plain")], keys), "",
                "| target | requests | copies sent | copies dropped | dropped per request |", "|---|---|---|---|---|"]
        for t in ("plain", "mirror-down", "mirror-slow"):
            if t in s:
                out.append(f"| {t} | {s[t]['requests']:,} | {s[t].get('mirror_sent', 0):,} | "
                           f"{s[t].get('mirror_dropped', 0):,} | {ratio(s[t].get('mirror_dropped', 0), s[t]['requests']):.3f} |")
        out += ["", "Copies counted from ramjet_mirror_requests_total{outcome=\"sent\"|\"dropped\"} around each run "
                "(after a mirror-slow run the harness waits for its copies in flight to end); the requests column "
                "counts the measured runs only, the copies include wrk's in-flight requests at the end. "
                f"Totals at the end: {results.get('mirror_counts_total')}; the slow mirror saw "
                f"{results.get('slow_mirror_seen')} in the whole run (warm-up and checks included).", ""]
    if "instructions" in secs:
        s, c = secs["instructions"]["summary"], secs["instructions"]["config"]
        out += ["## Instructions per request (callgrind, user space)", "",
                f"ramjet --workers 1 --io-driver {c['driver']} under `valgrind --tool=callgrind --separate-threads=yes`; "
                f"h2load --h1 -c{c['connections']} -m1 sends exactly N requests"
                + (" over HTTPS keep-alive (`--insn-tls`)" if c.get("tls") else "") + "; per request = "
                f"(Ir with N = {c['high']:,} − Ir with N = {c['low']:,}) / {c['high'] - c['low']:,}, "
                f"median of {c['rounds']} round(s). Plain route: direct.{DOMAIN}/p7, canary route: canary.{DOMAIN}/p7 "
                "(50/50 split, both sides the same backend). Kernel work (syscalls, TCP) is not counted.", "",
                "| route | worker thread Ir/request (median, min–max) | whole process Ir/request | "
                "policy source lines Ir/request |", "|---|---|---|---|"]
        for t in ("plain", "canary"):
            if t in s:
                w = s[t]["worker_ir_per_req_rounds"]
                out.append(f"| {t} | {s[t]['worker_ir_per_req']:,.0f} ({min(w):,.0f}–{max(w):,.0f}) | "
                           f"{s[t]['process_ir_per_req']:,.0f} | {s[t]['policy_ir_per_req']:,.1f} |")
        if "plain" in s and "canary" in s:
            pw, cw = s["plain"]["worker_ir_per_req"], s["canary"]["worker_ir_per_req"]
            pp, cp = s["plain"]["policy_ir_per_req"], s["canary"]["policy_ir_per_req"]
            out += ["", f"Worker thread, canary − plain: {cw - pw:,.0f} instructions per request (canary / plain "
                    f"{ratio(cw, pw):.4f}); the rounds' spread comes from how often the worker parks between "
                    "reads, which depends on timing.",
                    f"Policy source lines ({', '.join(POLICY_SOURCES)}), canary − plain: {cp - pp:,.1f} "
                    f"instructions per request = {100 * (cp - pp) / pw:.2f} % of the plain request's worker "
                    "instructions. By file, canary − plain: " + ", ".join(
                        f"{src.rsplit('/', 1)[-1]} {s['canary']['policy_ir_per_req_by_file'][src] - s['plain']['policy_ir_per_req_by_file'][src]:,.1f}"
                        for src in POLICY_SOURCES) + "."]
        out.append("")
    if "gateway" in secs:
        out += render_gateway(secs["gateway"], args)
    if results.get("tls_negotiated"):
        out += ["TLS negotiated: " + "; ".join(f"{k}: {v}" for k, v in results["tls_negotiated"].items()), ""]
    for key, title in (("tls", "HTTPS keep-alive"), ("handshake", "HTTPS, one request per connection, full handshakes"),
                       ("resume", "HTTPS, one request per connection, resumed sessions")):
        if key in secs:
            s = secs[key]["summary"]
            out += [f"## {title}", "", table(s, ["ramjet", "ramjet-base", "nginx", "haproxy"]), "",
                    ratios(secs[key], "ramjet", ["ramjet-base", "nginx", "haproxy"]), ""]
    if results.get("rss_mb"):
        out += ["Resident memory after the runs above (process and children, MiB): "
                + ", ".join(f"{k} {v:.1f}" for k, v in results["rss_mb"].items()) + ".", ""]
    if "churn" in secs:
        s = secs["churn"]["summary"]
        cc = results.get("churn_config", {})
        out += ["## Configuration churn under load", "",
                f"ramjet: {cc.get('ramjet_routes')} routes, {cc.get('publishes_per_run')} publishes per run "
                f"(POST then DELETE /admin/rollback); nginx: {cc.get('nginx_vhosts')} vhosts "
                f"({cc.get('nginx_locations')} locations), {cc.get('reloads_per_run')} "
                f"{'`nginx -s reload`' if args.nginx_reload == 'cli' else 'SIGHUP to the master'} per run.", "",
                table(s, ["ramjet steady", "ramjet churn", "nginx steady", "nginx churn"]), "",
                "Resident memory at the end (MiB): " + ", ".join(
                    f"{k} {v:.1f}" for k, v in results.get("rss_mb_churn", {}).items()) + ".", "",
                "| | publishes/reloads sent (ok/failed) | publishes/reloads done | errors | p99 churn/steady | req/s churn/steady |",
                "|---|---|---|---|---|---|"]
        for p in ("ramjet", "nginx"):
            a, b = s.get(f"{p} churn"), s.get(f"{p} steady")
            if a and b:
                out.append(f"| {p} | {a.get('churn_ok', 0)}/{a.get('churn_failed', 0)} | {a.get('churn_observed', '–')} | "
                           f"{a['errors']} (steady: {b['errors']}) | {ratio(a['p99_us'], b['p99_us']):.2f} | "
                           f"{ratio(a['rps'], b['rps']):.2f} |")
        out.append("")
    if "h2" in secs:
        s = secs["h2"]["summary"]
        out += ["## HTTP/2 clients (proxied over HTTP/1.1)", "",
                f"h2load -c{args.h2_clients} -m{args.h2_streams} -D{args.duration}; p50 and p99 come from "
                "h2load's per-request log (--log-file: every request of the measured phase, from its start to "
                "the end of its response).", "",
                table(s, ["ramjet h2c", "nginx h2c", "ramjet h2 tls", "nginx h2 tls"]), ""]
        out += [ratio_table(secs["h2"], [(f"ramjet {k}", f"nginx {k}") for k in ("h2c", "h2 tls")],
                            ("cpu_us_per_req", "rps", "p50_us", "p99_us")), "",
                "Issue 13's targets, ramjet / nginx: CPU ≤ 0.8 ×, req/s ≥ 1.2 ×, p99 ≤ 0.8 ×.", "",
                "SYNs dropped on a full listen queue during the runs (TcpExt ListenOverflows, whole machine, summed "
                "over rounds; each costs a connect a 1 s retransmission): "
                + ", ".join(f"{t} {s[t].get('listen_overflows', 0):,}" for t in
                            ("ramjet h2c", "nginx h2c", "ramjet h2 tls", "nginx h2 tls") if t in s) + ".", ""]
        if results.get("h2_idle_kib"):
            out += [f"Memory per idle HTTP/2 connection ({args.h2_idle} connections to a freshly started proxy, "
                    "one request each, then idle; resident memory before and after): "
                    + ", ".join(f"{k} {v:.1f} KiB" for k, v in results["h2_idle_kib"].items()) + ".", ""]
    out += render_issue18(results, args)
    v = verdicts(results)
    if v:
        out += ["## Targets", "", v, ""]
    v = verdicts_issue18(results)
    if v:
        out += ([] if "## Targets" in out else ["## Targets", ""]) + [v, ""]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
