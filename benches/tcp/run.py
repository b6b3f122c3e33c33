#!/usr/bin/env python3
"""TCP relay (Layer 4) side by side: ramjet's TCP route, HAProxy in `mode tcp` and nginx `stream`,
each in front of the same nginx HTTP backend, each proxy one worker pinned to one CPU and the
load on the other. Run it through `benches/tcp/run.sh` (which installs what is missing and builds
ramjet).

Three loads, interleaved round by round (medians over the rounds, and each proxy's ratio to ramjet
taken within a round):
  keepalive  wrk over 50 long-lived relayed connections, small answers: requests/s and the proxy's
             CPU per request (relaying many small writes)
  close      wrk with `Connection: close`: a new relayed connection per request (accept, connect to
             the backend, two half-closes)
  bulk       curl downloading a 256 MiB file through the relay, --bulk-transfers at a time: MB/s
             and the proxy's CPU per GB

Results: target/bench-tcp/<timestamp>/results.md (and results.json).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "benches", "proxy"))
import bench  # noqa: E402  (the proxy harness: processes, CPU accounting, wrk)

BIG_MB = 256


def write_backend(d, port):
    """nginx answering `ok` on / and a BIG_MB file on /big."""
    big = f"{d}/big.bin"
    with open(big, "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(BIG_MB):
            f.write(chunk)
    path = f"{d}/backend.conf"
    with open(path, "w") as f:
        f.write(bench.nginx_head(d, "backend"))
        f.write("http {\n  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n  sendfile on;\n")
        f.write(bench.nginx_temp_paths(d, "backend"))
        f.write(f"  server {{\n    listen 127.0.0.1:{port} default_server;\n")
        f.write(f'    location = /big {{ alias {big}; }}\n    location / {{ return 200 "ok"; }}\n  }}\n}}\n')
    return path


def write_ramjet(d, port, backend_port):
    path = f"{d}/ramjet.yaml"
    with open(path, "w") as f:
        f.write(f'backends:\n  b: {{ endpoints: ["127.0.0.1:{backend_port}"] }}\n')
        f.write(f"tcp:\n  - {{ port: {port}, backend: b }}\n")
    return path


def write_haproxy(d, port, backend_port):
    path = f"{d}/haproxy.cfg"
    with open(path, "w") as f:
        f.write(
            "global\n  nbthread 1\n  maxconn 8192\n"
            "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n"
            f"frontend fe\n  bind 127.0.0.1:{port}\n  default_backend be\n"
            f"backend be\n  server s1 127.0.0.1:{backend_port}\n"
        )
    return path


def bulk(args, server, port):
    """--bulk-transfers downloads of /big at once through `port`: MB/s and the proxy's CPU per GB."""
    url = f"http://127.0.0.1:{port}/big"
    c0, t0 = server.cpu(), time.monotonic()
    curls = [
        subprocess.Popen(bench.taskset(args.load_cpus) + ["curl", "-s", "-o", "/dev/null", "-w", "%{size_download}", url],
                         stdout=subprocess.PIPE, text=True)
        for _ in range(args.bulk_transfers)
    ]
    sizes = [int(c.communicate(timeout=600)[0] or 0) for c in curls]
    secs, cpu = time.monotonic() - t0, (server.cpu() - c0) / bench.CLK_TCK
    total = sum(sizes)
    if total != args.bulk_transfers * BIG_MB << 20:
        raise RuntimeError(f"{server.name}: {total} bytes downloaded, not {args.bulk_transfers * BIG_MB} MiB")
    gb = total / 1e9
    res = {"mb_per_s": total / 1e6 / secs, "cpu_s_per_gb": cpu / gb}
    bench.log(f"  {server.name + ' bulk':<28} {res['mb_per_s']:>9.0f} MB/s  cpu {res['cpu_s_per_gb']:.3f} s/GB")
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_relay_args(p, REPO)
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bulk-transfers", type=int, default=4)
    args = p.parse_args()

    out = f"{REPO}/target/bench-tcp/{time.strftime('%Y%m%d-%H%M%S')}"
    os.makedirs(out, exist_ok=True)
    d = out
    ports = [p for p in range(24100, 24200) if bench.port_free(p)][:7]
    backend_port, ramjet_port, haproxy_port, nginx_port, http_port, https_port, admin_port = ports

    backend_proc = bench.start_nginx("backend", write_backend(d, backend_port), d, backend_port, args.load_cpus)
    backend = bench.Server("backend", backend_proc, [backend_port])
    servers = []
    try:
        r = bench.start_ramjet(args, "ramjet", write_ramjet(d, ramjet_port, backend_port), d, http_port, https_port,
                               admin_port, cpus=args.proxy_cpus)
        bench.wait_port(ramjet_port, r, "ramjet")
        servers.append(bench.Server("ramjet", r, [ramjet_port], worker_prefix="ramjet-worker"))
        h = bench.PROCS.start("haproxy", bench.taskset(args.proxy_cpus) + ["haproxy", "-db", "-f", write_haproxy(d, haproxy_port, backend_port)],
                              stderr_path=f"{d}/haproxy.stderr")
        bench.wait_port(haproxy_port, h, "haproxy")
        servers.append(bench.Server("haproxy", h, [haproxy_port]))
        n = bench.start_nginx("nginx", bench.write_nginx_stream(d, nginx_port, backend_port, args.stream_module), d,
                              nginx_port, args.proxy_cpus)
        servers.append(bench.Server("nginx", n, [nginx_port]))

        results = {s.name: {"keepalive": [], "close": [], "bulk": []} for s in servers}
        for round_ in range(args.rounds):
            bench.log(f"round {round_ + 1}/{args.rounds}")
            for s in servers:
                url = f"http://127.0.0.1:{s.ports[0]}/"
                results[s.name]["keepalive"].append(bench.measure(args, s, backend, url, "bench", label=f"{s.name} keep-alive"))
                results[s.name]["close"].append(
                    bench.measure(args, s, backend, url, "bench", extra_headers=("Connection: close",), label=f"{s.name} close"))
                results[s.name]["bulk"].append(bulk(args, s, s.ports[0]))
    finally:
        bench.PROCS.stop_all()

    def med(name, load, key):
        return statistics.median(r[key] for r in results[name][load])

    def ratio(name, load, key):
        return statistics.median(a[key] / b[key] for a, b in zip(results[name][load], results["ramjet"][load]) if b[key])

    lines = [f"# TCP relay, {args.rounds} rounds (medians; ratios to ramjet taken within each round)\n",
             f"`benches/tcp/run.sh {' '.join(sys.argv[1:])}` on {os.uname().nodename}\n",
             "| load | proxy | requests/s or MB/s | proxy CPU (µs/req or s/GB) | errors | ratio: rate | ratio: CPU |",
             "|---|---|---|---|---|---|---|"]
    for load, rate, cpu in (("keepalive", "rps", "cpu_us_per_req"), ("close", "rps", "cpu_us_per_req"), ("bulk", "mb_per_s", "cpu_s_per_gb")):
        for s in servers:
            errors = sum(r.get("errors", 0) for r in results[s.name][load])
            lines.append(f"| {load} | {s.name} | {med(s.name, load, rate):.0f} | {med(s.name, load, cpu):.3f} | {errors} | "
                         f"{ratio(s.name, load, rate):.2f} | {ratio(s.name, load, cpu):.2f} |")
    bench.write_results(out, lines, results)


if __name__ == "__main__":
    main()
