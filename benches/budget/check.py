#!/usr/bin/env python3
"""The request path's instruction budget, checked on both I/O drivers.

Counts the user-space instructions one ramjet worker spends on a plain keep-alive request (one
route among 1,000, no optional feature on it, proxied to a backend) with valgrind's callgrind,
and fails when a count is over its budget in benches/budget/budget.json. Instruction counts are
deterministic enough for CI where wall time is not: the per-request figure is the difference of two runs, (Ir(N2) - Ir(N1)) / (N2 - N1), so
start-up, the first connection and shutdown cancel out.

    benches/budget/check.py --ramjet target/release/ramjet            # check against the budget
    benches/budget/check.py --ramjet target/release/ramjet --report   # print the counts only

What a feature costs a request: the same count with flags for the measured ramjet and fields for
the request (`--report` then, since the budget is for the plain request):

    benches/budget/check.py --ramjet target/release/ramjet --report \
        --flag=--otlp-endpoint=http://127.0.0.1:9 --flag=--trace-sample-ratio=0
    benches/budget/check.py ... --field 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'

The backend is a second ramjet (not under valgrind) answering from a direct response; the client
is this script, one request in flight on one connection, so the count is the worker's alone.
"""

import argparse
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from valgrind import command as valgrind_command

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES = 1000
TARGET = 42
DOMAIN = "bench.test"
REQUEST = (f"GET /p/bench HTTP/1.1\r\nHost: h{TARGET}.{DOMAIN}\r\nUser-Agent: budget/1\r\n"
           "Accept: */*\r\n\r\n").encode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(admin_port, proc, name, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", admin_port), timeout=2) as c:
                c.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if c.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name} was not ready within {timeout} s")


def start(argv, name, admin_port, tmp, timeout):
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    env = dict(os.environ, RAMJET_LOG="warn")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    wait_ready(admin_port, proc, name, timeout)
    return proc


def ramjet_args(binary, routes, driver):
    http, https, admin = free_port(), free_port(), free_port()
    argv = [binary, "--static-routes", routes, "--workers", "1", "--io-driver", driver,
            "--http-addr", f"127.0.0.1:{http}", "--https-addr", f"127.0.0.1:{https}",
            "--admin-addr", f"127.0.0.1:{admin}", "--drain-timeout", "1s"]
    return argv, http, admin


def requests(port, n, request):
    """`n` keep-alive `request`s on one connection, one at a time; each must answer 200."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        for _ in range(n):
            c.sendall(request)
            while True:
                end = buf.find(b"\r\n\r\n")
                if end >= 0:
                    head = buf[:end].decode("latin-1")
                    m = re.search(r"(?im)^content-length:\s*(\d+)", head)
                    total = end + 4 + (int(m.group(1)) if m else 0)
                    if len(buf) >= total:
                        if not head.startswith("HTTP/1.1 200"):
                            raise RuntimeError(f"unexpected answer: {head!r}")
                        buf = buf[total:]
                        break
                chunk = c.recv(65536)
                if not chunk:
                    raise RuntimeError("the proxy closed the connection")
                buf += chunk


def worker_instructions(prefix):
    """The worker thread's total Ir from one callgrind run (--separate-threads=yes): the thread whose
    profile names ramjet_dataplane's run_worker, its entry function."""
    total = None
    for path in sorted(glob.glob(prefix + "*")):
        if os.path.getsize(path) == 0:
            continue
        with open(path, errors="replace") as f:
            text = f.read()
        if not re.search(r"ramjet_dataplane::[\w:]*run_worker", text):
            continue
        m = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
        if m:
            total = (total or 0) + int(m.group(1))
    if total is None:
        raise RuntimeError(f"no worker thread in the callgrind output {prefix}*")
    return total


def measure(binary, valgrind, backend_port, driver, low, high, tmp, flags=(), request=REQUEST):
    routes = os.path.join(tmp, "routes.yaml")
    per_run = {}
    for n in (low, high):
        prefix = os.path.join(tmp, f"callgrind-{driver}-{n}.out")
        argv, http, admin = ramjet_args(binary, routes, driver)
        argv += list(flags)
        wrapper = valgrind + ["--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={prefix}.%p"]
        proc = start(wrapper + argv, f"proxy-{driver}-{n}", admin, tmp, timeout=300)
        try:
            requests(http, 1, request)  # the one warm-up connection, the same in both runs
            requests(http, n, request)
        finally:
            proc.terminate()
            proc.wait(timeout=300)
        per_run[n] = worker_instructions(prefix)
        for path in glob.glob(prefix + "*"):
            os.unlink(path)
    return (per_run[high] - per_run[low]) / (high - low)


def write_routes(tmp, backend_port):
    lines = ["backends:"]
    lines += [f"  b{i}: {{ endpoints: [\"127.0.0.1:{backend_port}\"] }}" for i in range(ROUTES)]
    lines.append("routes:")
    lines += [f"  - {{ host: h{i}.{DOMAIN}, path: /p, pathType: Prefix, backend: b{i} }}" for i in range(ROUTES)]
    with open(os.path.join(tmp, "routes.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(tmp, "backend.yaml"), "w") as f:
        f.write("backends:\n  ok: { respond: { status: 200, body: \"ok\\n\" } }\ndefaultBackend: ok\n"
                "routes:\n  - { path: /, pathType: Prefix, backend: ok }\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ramjet", required=True, help="the release binary to measure")
    ap.add_argument("--budget", default=os.path.join(HERE, "budget.json"))
    ap.add_argument("--drivers", default="io-uring,legacy", help="comma list of io-uring,legacy")
    ap.add_argument("--low", type=int, default=200)
    ap.add_argument("--high", type=int, default=5200)
    ap.add_argument("--runs", type=int, default=3,
                    help="measurements per driver; the median is checked (epoll's count varies with timing)")
    ap.add_argument("--report", action="store_true", help="print the counts; check nothing")
    ap.add_argument("--flag", action="append", default=[], help="a flag for the measured ramjet (repeatable)")
    ap.add_argument("--field", action="append", default=[], help="a field line for the request (repeatable)")
    args = ap.parse_args()
    request = REQUEST[:-2] + b"".join(f.encode() + b"\r\n" for f in args.field) + b"\r\n"
    valgrind = valgrind_command(os.path.join(HERE, "..", "..", "target"))
    with open(args.budget) as f:
        budget = json.load(f)
    tmp = tempfile.mkdtemp(prefix="ramjet-budget-")
    backend_argv, backend_port, backend_admin = ramjet_args(args.ramjet, os.path.join(tmp, "backend.yaml"), "auto")
    write_routes(tmp, backend_port)
    backend = start(backend_argv, "backend", backend_admin, tmp, timeout=60)
    failed = []
    try:
        for driver in args.drivers.split(","):
            runs = sorted(measure(args.ramjet, valgrind, backend_port, driver, args.low, args.high, tmp,
                                  args.flag, request) for _ in range(args.runs))
            per_request = runs[len(runs) // 2]
            limit = budget["plain_keepalive"][driver]
            verdict = "ok" if per_request <= limit["max"] else "OVER BUDGET"
            print(f"plain keep-alive request, {driver}: {per_request:,.0f} worker instructions, the median of "
                  f"{', '.join(f'{r:,.0f}' for r in runs)} (budget {limit['max']:,}): {verdict}")
            if per_request > limit["max"]:
                failed.append(driver)
    finally:
        backend.terminate()
        backend.wait(timeout=30)
    shutil.rmtree(tmp, ignore_errors=True)
    if failed and not args.report:
        sys.exit(f"over the instruction budget on {', '.join(failed)}: see benches/budget/README.md")


if __name__ == "__main__":
    main()
