#!/usr/bin/env python3
"""UDP relay (Layer 4) side by side: ramjet's UDP route and nginx `stream` UDP (`listen … udp`),
each in front of the same UDP echo backend, each proxy one worker pinned to one CPU and the load
and the backend on the other. Run it through `benches/udp/run.sh` (which installs what is missing
and builds ramjet). HAProxy does not relay UDP.

The load (`udp_load.c`, built here with gcc): --flows client sockets, each a flow of its own
through the proxy, each with one --size-byte datagram in flight (closed loop: the answer sends the
next). Measured per run of --duration seconds, rounds interleaved: datagrams relayed per second
(both ways) and the proxy's CPU per datagram; medians over the rounds, each proxy's ratio to ramjet
taken within a round.

Results: target/bench-udp/<timestamp>/results.md (and results.json).
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
import bench  # noqa: E402  (the proxy harness: processes, CPU accounting)


def write_ramjet(d, port, backend_port):
    path = f"{d}/ramjet.yaml"
    with open(path, "w") as f:
        f.write(f'backends:\n  echo: {{ endpoints: ["127.0.0.1:{backend_port}"] }}\n')
        f.write(f"udp:\n  - {{ port: {port}, backend: echo }}\n")
    return path


def wait_udp(port, proc, name, timeout=30.0):
    """Until a datagram to `port` is answered (the proxy relays to the echo backend)."""
    import socket
    deadline = time.monotonic() + timeout
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.2)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited")
        try:
            s.sendto(b"ready?", ("127.0.0.1", port))
            if s.recv(64) == b"ready?":
                return
        except OSError:
            pass
    raise RuntimeError(f"{name} never relayed a datagram on udp/{port}")


def run_load(args, tool, server, port):
    c0 = server.cpu()
    out = subprocess.run(bench.taskset(args.load_cpus) + [tool, "load", str(port), str(args.duration), str(args.flows),
                                                          str(args.size)],
                         check=True, capture_output=True, text=True).stdout.split()
    cpu = (server.cpu() - c0) / bench.CLK_TCK
    round_trips, lost, secs = int(out[0]), int(out[1]), float(out[2])
    datagrams = 2 * round_trips
    res = {"datagrams_per_s": datagrams / secs, "cpu_us_per_datagram": cpu / datagrams * 1e6 if datagrams else 0,
           "lost": lost}
    bench.log(f"  {server.name:<10} {res['datagrams_per_s']:>10.0f} datagrams/s  cpu {res['cpu_us_per_datagram']:.2f} µs/datagram"
              f"  lost {lost}")
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_relay_args(p, REPO)
    p.add_argument("--flows", type=int, default=64)
    p.add_argument("--size", type=int, default=64, help="bytes per datagram")
    args = p.parse_args()

    out = f"{REPO}/target/bench-udp/{time.strftime('%Y%m%d-%H%M%S')}"
    os.makedirs(out, exist_ok=True)
    d = out
    tool = f"{d}/udp_load"
    subprocess.run(["gcc", "-O2", "-Wall", "-o", tool, f"{HERE}/udp_load.c"], check=True)
    ports = [p for p in range(24200, 24300) if bench.port_free(p)][:6]
    backend_port, ramjet_port, nginx_port, http_port, https_port, admin_port = ports

    backend = bench.PROCS.start("echo", bench.taskset(args.load_cpus) + [tool, "echo", str(backend_port)],
                                stderr_path=f"{d}/echo.stderr")
    servers = []
    try:
        r = bench.start_ramjet(args, "ramjet", write_ramjet(d, ramjet_port, backend_port), d, http_port, https_port,
                               admin_port, cpus=args.proxy_cpus)
        wait_udp(ramjet_port, r, "ramjet")
        servers.append(bench.Server("ramjet", r, [ramjet_port]))
        # nginx's UDP proxying as ramjet's: one session per client address, ended after 60 s idle.
        conf = bench.write_nginx_stream(d, nginx_port, backend_port, args.stream_module, " udp", "    proxy_timeout 60s;\n")
        n = bench.PROCS.start("nginx", bench.taskset(args.proxy_cpus) + ["nginx", "-p", d, "-c", conf],
                              stderr_path=f"{d}/nginx.stderr")
        wait_udp(nginx_port, n, "nginx")
        servers.append(bench.Server("nginx", n, [nginx_port]))
        if backend.poll() is not None:
            raise RuntimeError(f"the echo backend exited; see {d}/echo.stderr")

        results = {s.name: [] for s in servers}
        for round_ in range(args.rounds):
            bench.log(f"round {round_ + 1}/{args.rounds}")
            for s in servers:
                results[s.name].append(run_load(args, tool, s, s.ports[0]))
    finally:
        bench.PROCS.stop_all()

    def med(name, key):
        return statistics.median(r[key] for r in results[name])

    def ratio(name, key):
        return statistics.median(a[key] / b[key] for a, b in zip(results[name], results["ramjet"]) if b[key])

    lines = [f"# UDP relay, {args.rounds} rounds of {args.duration} s, {args.flows} flows, {args.size}-byte datagrams "
             "(medians; ratios to ramjet taken within each round)\n",
             f"`benches/udp/run.sh {' '.join(sys.argv[1:])}` on {os.uname().nodename}\n",
             "| proxy | datagrams/s (both ways) | proxy CPU (µs/datagram) | lost | ratio: rate | ratio: CPU |",
             "|---|---|---|---|---|---|"]
    for s in servers:
        lost = sum(r["lost"] for r in results[s.name])
        lines.append(f"| {s.name} | {med(s.name, 'datagrams_per_s'):.0f} | {med(s.name, 'cpu_us_per_datagram'):.2f} | {lost} | "
                     f"{ratio(s.name, 'datagrams_per_s'):.2f} | {ratio(s.name, 'cpu_us_per_datagram'):.2f} |")
    bench.write_results(out, lines, results)


if __name__ == "__main__":
    main()
