#!/usr/bin/env python3
"""Where does each server spend its CPU for one traffic shape: ramjet and nginx side by side.

Run it through `benches/profile/run.sh` (which installs missing tools), or directly:
`python3 benches/profile/profile.py --ramjet target/release/ramjet --shape close`.

The throughput harness (benches/proxy/bench.py) says how much CPU a request costs each server; this
says where that CPU goes. It reuses the harness's setup unchanged (its backend, its ramjet routes and
nginx configuration, its server start-up, its wrk invocation), so the two answer about the same
thing: one worker each, 127.0.0.1, wrk -t1 -c50 in front, one nginx `return 200` backend behind.

Per server, two separate wrk runs:
  1. `perf record -e cpu-clock -g -p PID` (the cpu-clock software event: no hardware counters needed)
     for --duration seconds: the top symbols by self time, with µs per request (a symbol's share of
     the sampled CPU time divided by the requests wrk completed), the kernel / user split, by DSO,
     and for ramjet by thread (the worker against the control thread). CPU per request from
     /proc (utime and stime) around the same run is the cross-check.
  2. `strace -c -f -p PID` for --strace-duration seconds: system calls per request, by name. strace
     slows the server a lot; only the counts are used, divided by the requests of that run. Ramjet's
     workers do their socket I/O through io_uring, so its reads, writes and accepts are not system
     calls: io_uring_enter is, and the io_uring operations it submits are counted by opcode from the
     io_uring:io_uring_submit_req tracepoint during the same run (SQEs per request).

Shapes: `close` is the harness's close section (plain HTTP, every request `Connection: close`);
`https` is its tls section (HTTPS keep-alive, the SNI set by the harness's LD_PRELOAD shim).
"""

import argparse
import atexit
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "benches", "proxy"))
import bench  # noqa: E402  (the proxy harness: its configs, servers and wrk)

PROCS = bench.PROCS
CLK_TCK = bench.CLK_TCK
WORKER_PREFIX = "ramjet-worker"
# The harness's ramjet io driver: bench.start_ramjet's default, what its sections measure.
IO_DRIVER = "io-uring"


def log(msg):
    print(f"[profile {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ramjet", help="ramjet release binary (required unless --servers nginx); not built here")
    ap.add_argument("--shape", choices=("close", "https", "keepalive"), default="close",
                    help="close: plain HTTP, Connection: close on every request; https: HTTPS keep-alive; "
                         "keepalive: plain HTTP keep-alive (default close)")
    ap.add_argument("--duration", type=int, default=10, help="seconds of wrk under perf record (default 10)")
    ap.add_argument("--strace-duration", type=int, default=5,
                    help="seconds of wrk under strace -c (default 5)")
    ap.add_argument("--warmup", type=int, default=2, help="seconds of unmeasured load per server first (default 2)")
    ap.add_argument("--connections", type=int, default=50, help="wrk -c (default 50, as the harness)")
    ap.add_argument("--threads", type=int, default=1, help="wrk -t (default 1, as the harness)")
    ap.add_argument("--routes", type=int, default=1000, help="routes per proxy (default 1000, as the harness)")
    ap.add_argument("--freq", type=int, default=2999, help="perf record -F (default 2999)")
    ap.add_argument("--top", type=int, default=25, help="symbols listed per server (default 25)")
    ap.add_argument("--servers", default="ramjet,nginx", help="comma list of ramjet,nginx (default both)")
    ap.add_argument("--port-base", type=int, default=27300,
                    help="first of 9 ports on 127.0.0.1 (default 27300; the harness uses 27100 and up)")
    ap.add_argument("--out", help="also write the report to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir with the raw outputs")
    a = ap.parse_args()
    a.servers = [s.strip() for s in a.servers.split(",") if s.strip()]
    if not a.servers or set(a.servers) - {"ramjet", "nginx"}:
        ap.error("--servers takes ramjet and/or nginx")
    if "ramjet" in a.servers:
        if not a.ramjet:
            ap.error("--ramjet PATH is required (a release build: cargo build --release --bin ramjet)")
        if not os.access(a.ramjet, os.X_OK):
            ap.error(f"no executable ramjet at {a.ramjet}")
    if not (1 <= a.duration <= 600 and 1 <= a.strace_duration <= 600):
        ap.error("--duration and --strace-duration must be 1..600")
    if a.routes % bench.ROUTES_PER_HOST:
        ap.error(f"--routes must be a multiple of {bench.ROUTES_PER_HOST}")
    # what bench.run_wrk and bench.start_ramjet read from their args
    a.load_cpus = a.proxy_cpus = None
    return a


# --------------------------------------------------------------------------------------------
# CPU from /proc


def stat_ticks(path):
    """(utime, stime) clock ticks from a /proc/.../stat file."""
    with open(path) as f:
        raw = f.read()
    rest = raw[raw.rindex(")") + 2:].split()
    return int(rest[11]), int(rest[12])


def thread_names(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                out[int(tid)] = f.read().strip()
        except OSError:
            pass
    return out


def cpu_snapshot(pid):
    """(user, system) ticks of the whole process `pid` and of its ramjet worker threads."""
    whole = stat_ticks(f"/proc/{pid}/stat")
    wu = ws = 0
    for tid, name in thread_names(pid).items():
        if name.startswith(WORKER_PREFIX):
            try:
                u, s = stat_ticks(f"/proc/{pid}/task/{tid}/stat")
            except OSError:
                continue
            wu, ws = wu + u, ws + s
    return whole, (wu, ws)


def nginx_worker_pid(master, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{master}/task/{master}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        if len(kids) == 1:
            return kids[0]
        time.sleep(0.05)
    raise RuntimeError(f"nginx master {master} has no single worker process")


# --------------------------------------------------------------------------------------------
# perf and strace


def run_load(args, srv, duration, label):
    return bench.run_wrk(args, srv["url"], srv["host"], srv["headers"], srv["env"], duration=duration, label=label)


def attach(name, argv, d, what):
    p = PROCS.start(name, argv, stop_signal=signal.SIGINT, stderr_path=f"{d}/{name}.stderr")
    time.sleep(1.0)  # attached to every thread before the load starts
    if p.poll() is not None:
        with open(f"{d}/{name}.stderr", errors="replace") as f:
            raise RuntimeError(f"{what} exited ({p.returncode}): {f.read()[-2000:]}")
    return p


def perf_report(data, sort, out_path, extra=()):
    r = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio", "-g", "none", "--sort", sort,
                        "--percent-limit", "0", *extra], capture_output=True, text=True, timeout=600)
    with open(out_path, "w") as f:
        f.write(r.stdout)
        if r.returncode:
            f.write(r.stderr)
    if r.returncode:
        raise RuntimeError(f"perf report --sort {sort} failed: {r.stderr[-1000:]}")
    return r.stdout


def event_count_ns(report):
    m = re.search(r"^# Event count \(approx\.\): (\d+)", report, re.M)
    return int(m.group(1)) if m else 0


def samples(report):
    m = re.search(r"^# Samples: (\S+)", report, re.M)
    return m.group(1) if m else "?"


SYM_LINE = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*?)\s*$")
ONE_KEY_LINE = re.compile(r"^\s*([\d.]+)%\s+(.*?)\s*$")


def report_lines(report, pattern):
    """The matches of `pattern` among a `perf report --stdio` text's lines (comments skipped)."""
    return (m for line in report.splitlines() if not line.startswith("#") for m in [pattern.match(line)] if m)


def parse_symbols(report):
    """[(percent, dso, kernel?, symbol)] from `perf report --sort dso,symbol`."""
    return [(float(m.group(1)), m.group(2), m.group(3) == "k", re.sub(r"\s+-\s+-$", "", m.group(4)))  # perf 6.1's empty IPC columns
            for m in report_lines(report, SYM_LINE)]


def parse_one_key(report):
    return [(float(m.group(1)), m.group(2)) for m in report_lines(report, ONE_KEY_LINE) if m.group(2)]


def perf_phase(args, srv, d):
    name = srv["name"]
    data = f"{d}/{name}.perf.data"
    # -N: no copies of the binaries into ~/.debug (the report is made here, from the same files)
    pr = attach(f"perf-{name}", ["perf", "record", "-e", "cpu-clock", "-F", str(args.freq), "-g", "-N",
                                 "-p", str(srv["pid"]), "-o", data], d, "perf record")
    (u0, s0), (wu0, ws0) = cpu_snapshot(srv["pid"])
    i0, t0 = bench.resched_ipis(), time.monotonic()
    w = run_load(args, srv, args.duration, f"perf {name}")
    (u1, s1), (wu1, ws1) = cpu_snapshot(srv["pid"])
    i1, wall = bench.resched_ipis(), time.monotonic() - t0
    PROCS.stop(pr, timeout=120)
    n = w["requests"] or 1
    us = 1e6 / CLK_TCK / n
    res = {"wrk": w, "rps": w["requests"] / (w["duration_us"] / 1e6), "requests": w["requests"],
           "errors": sum(w[k] for k in ("connect", "read", "write", "timeout", "status")),
           "user_us": (u1 - u0) * us, "sys_us": (s1 - s0) * us, "wall_s": wall,
           "ipis_per_req": (i1 - i0) / n}
    res["cpu_us"] = res["user_us"] + res["sys_us"]
    if srv["threads"]:
        res["worker_us"] = (wu1 - wu0 + ws1 - ws0) * us
    sym = perf_report(data, "dso,symbol", f"{d}/{name}.perf-symbols.txt")
    res["samples"] = samples(sym)
    res["sampled_us"] = event_count_ns(sym) / 1000 / n  # cpu-clock periods are nanoseconds
    res["symbols"] = parse_symbols(sym)
    res["dsos"] = parse_one_key(perf_report(data, "dso", f"{d}/{name}.perf-dso.txt"))
    if srv["threads"]:
        res["comms"] = parse_one_key(perf_report(data, "comm", f"{d}/{name}.perf-threads.txt"))
    res["kernel_pct"] = sum(p for p, _, k, _ in res["symbols"] if k)
    log(f"  perf {name}: {res['rps']:.0f} req/s, {res['cpu_us']:.2f} µs/req (/proc), {res['samples']} samples")
    return res


STRACE_LINE = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+)?\s*(\S+)\s*$")


def parse_strace(path):
    """{syscall: (calls, errors)} from `strace -c` output."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = STRACE_LINE.match(line)
            if m and m.group(3) != "total":
                out[m.group(3)] = (int(m.group(1)), int(m.group(2) or 0))
    return out


def strace_phase(args, srv, d):
    name = srv["name"]
    out = f"{d}/{name}.strace.txt"
    sp = attach(f"strace-{name}", ["strace", "-c", "-f", "-p", str(srv["pid"]), "-o", out], d, "strace")
    tp, tdata = None, f"{d}/{name}.uring.perf.data"
    if srv["uring"]:
        tp = attach(f"perf-uring-{name}", ["perf", "record", "-e", "io_uring:io_uring_submit_req", "-N", "-p",
                                           str(srv["pid"]), "-o", tdata], d, "perf record (io_uring tracepoint)")
    w = run_load(args, srv, args.strace_duration, f"strace {name}")
    if tp:
        PROCS.stop(tp, timeout=120)
    PROCS.stop(sp, timeout=120)
    n = w["requests"] or 1
    res = {"wrk": w, "requests": w["requests"], "rps": w["requests"] / (w["duration_us"] / 1e6),
           "syscalls": parse_strace(out)}
    res["per_req"] = {k: c / n for k, (c, _) in res["syscalls"].items()}
    res["errors_per_req"] = {k: e / n for k, (_, e) in res["syscalls"].items()}
    if tp:
        r = subprocess.run(["perf", "script", "-i", tdata, "-F", "trace"], capture_output=True, text=True,
                           timeout=600)
        ops = {}
        for m in re.finditer(r"opcode (\w+)", r.stdout):
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
        with open(f"{d}/{name}.uring-ops.json", "w") as f:
            json.dump(ops, f, indent=1)
        res["sqes_per_req"] = {k: v / n for k, v in ops.items()}
    log(f"  strace {name}: {res['rps']:.0f} req/s under strace, {sum(res['per_req'].values()):.2f} syscalls/req")
    return res


# --------------------------------------------------------------------------------------------
# report


def short(sym, width=90):
    return sym if len(sym) <= width else sym[:width - 1] + "…"


def dso_name(dso):
    return "[kernel]" if dso.startswith("[kernel") else dso


def server_section(args, srv, p, s):
    name = srv["name"]
    out = [f"== {name} ({srv['what']})", ""]
    out.append(f"perf run ({args.duration} s): {p['rps']:,.0f} req/s, {p['requests']:,} requests, {p['errors']} errors, "
               f"p99 {p['wrk']['p99'] / 1000:.2f} ms")
    cpu = (f"CPU per request (/proc, {'the whole process' if srv['threads'] else 'the worker process'}): "
           f"{p['cpu_us']:.2f} µs (user {p['user_us']:.2f}, system {p['sys_us']:.2f})")
    if "worker_us" in p:
        cpu += f"; worker threads {p['worker_us']:.2f} µs"
    out.append(cpu)
    out.append(f"sampled by perf: {p['sampled_us']:.2f} µs/req in {p['samples']} samples; kernel "
               f"{p['kernel_pct']:.1f} %, user {100 - p['kernel_pct']:.1f} %; reschedule IPIs "
               f"{p['ipis_per_req']:.3f}/req (machine-wide)")
    out.append("by DSO: " + ", ".join(f"{dso_name(k)} {v:.1f} %" for v, k in p["dsos"] if v >= 0.1))
    if p.get("comms"):
        out.append("by thread: " + ", ".join(f"{k} {v:.1f} %" for v, k in p["comms"] if v >= 0.1))
    out += ["", f"top {args.top} symbols by self time (share of {name}'s samples, and µs per request):",
            f"  {'self':>6}  {'µs/req':>6}  {'dso':<18} symbol"]
    for pct, dso, kern, sym in p["symbols"][:args.top]:
        out.append(f"  {pct:5.2f}%  {pct / 100 * p['sampled_us']:6.3f}  {short(dso_name(dso), 18):<18} "
                   f"{'[k] ' if kern else ''}{short(sym)}")
    out += ["", f"system calls per request (strace -c -f, {args.strace_duration} s: {s['requests']:,} requests at "
            f"{s['rps']:,.0f} req/s under strace):"]
    rows = sorted(s["per_req"].items(), key=lambda kv: -kv[1])
    total = sum(v for _, v in rows)
    for k, v in rows:
        if v >= 0.005 or k == "io_uring_enter":
            err = s["errors_per_req"].get(k, 0)
            out.append(f"  {k:<22} {v:8.3f}" + (f"   (failed {err:.3f}: EAGAIN, EINPROGRESS and the like)" if err >= 0.005 else ""))
    if "io_uring_enter" not in s["per_req"]:
        out.append(f"  {'io_uring_enter':<22} {0:8.3f}")
    out.append(f"  {'total':<22} {total:8.3f}")
    if "sqes_per_req" in s:
        q = sorted(s["sqes_per_req"].items(), key=lambda kv: -kv[1])
        out += ["", "io_uring operations submitted per request (io_uring:io_uring_submit_req, same run; a "
                "multishot operation counts once): " + (", ".join(f"{k} {v:.3f}" for k, v in q) or "none")
                + f"; total {sum(v for _, v in q):.3f}"]
    return out + [""]


def side_by_side(args, servers, res):
    names = [s["name"] for s in servers]
    col = max(12, *(len(n) + 2 for n in names))
    head = f"  {'':<34}" + "".join(f"{n:>{col}}" for n in names)

    def row(label, fn):
        cells = []
        for n in names:
            try:
                v = fn(res[n])
            except (KeyError, TypeError):
                v = None
            cells.append(f"{'-' if v is None else v:>{col}}")
        return f"  {label:<34}" + "".join(cells)

    out = ["== side by side", "", head,
           row("req/s (perf run)", lambda r: f"{r['perf']['rps']:,.0f}"),
           row("CPU µs/req (/proc)", lambda r: f"{r['perf']['cpu_us']:.2f}"),
           row("  user", lambda r: f"{r['perf']['user_us']:.2f}"),
           row("  system", lambda r: f"{r['perf']['sys_us']:.2f}"),
           row("sampled µs/req (perf)", lambda r: f"{r['perf']['sampled_us']:.2f}"),
           row("  kernel", lambda r: f"{r['perf']['kernel_pct'] / 100 * r['perf']['sampled_us']:.2f}"),
           row("  user", lambda r: f"{(100 - r['perf']['kernel_pct']) / 100 * r['perf']['sampled_us']:.2f}"),
           row("kernel share of samples", lambda r: f"{r['perf']['kernel_pct']:.1f} %"),
           row("reschedule IPIs/req", lambda r: f"{r['perf']['ipis_per_req']:.3f}"),
           row("system calls/req (strace)", lambda r: f"{sum(r['strace']['per_req'].values()):.2f}"),
           row("  io_uring_enter/req", lambda r: f"{r['strace']['per_req'].get('io_uring_enter', 0):.3f}"),
           row("io_uring SQEs/req", lambda r: f"{sum(r['strace']['sqes_per_req'].values()):.2f}"), ""]
    calls = {}
    for n in names:
        for k, v in res[n]["strace"]["per_req"].items():
            calls[k] = max(calls.get(k, 0), v)
    out.append(f"  {'system calls per request':<34}" + "".join(f"{n:>{col}}" for n in names))
    for k in sorted(calls, key=lambda k: -calls[k]):
        if calls[k] >= 0.005 or k == "io_uring_enter":
            out.append(f"  {k:<34}" + "".join(f"{res[n]['strace']['per_req'].get(k, 0):>{col}.3f}" for n in names))
    return out + [""]


# --------------------------------------------------------------------------------------------


def main():
    args = parse_args()
    for tool in ("wrk", "nginx", "openssl", "gcc", "perf", "strace"):
        if not shutil.which(tool):
            sys.exit(f"profile: `{tool}` is not installed (benches/profile/run.sh installs it)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGTERM, bench._on_signal)
    signal.signal(signal.SIGHUP, bench._on_signal)
    atexit.register(PROCS.stop_all)
    ports = {k: args.port_base + i for i, k in enumerate(
        ("backend", "ramjet_http", "ramjet_https", "ramjet_admin", "nginx_http", "nginx_https",
         "probe_http", "probe_https", "probe_admin"))}
    busy = [f"{k}={p}" for k, p in ports.items() if not bench.port_free(p)]
    if busy:
        sys.exit(f"profile: ports in use on 127.0.0.1: {', '.join(busy)}; pick another --port-base")

    d = tempfile.mkdtemp(prefix="ramjet-profile-")
    log(f"raw outputs in {d}" + ("" if args.keep else " (removed at the end; --keep keeps them)"))
    try:
        text = "\n".join(run(args, ports, d)) + "\n"
        with open(f"{d}/report.txt", "w") as f:
            f.write(text)
    finally:
        PROCS.stop_all()
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        log(f"report written to {args.out}")
    log(f"raw outputs: {d}" if args.keep else f"raw outputs removed ({d}); --keep keeps them")
    return 0


def run(args, ports, d):
    tls = args.shape == "https"
    cert, key, _ = bench.make_cert(d)
    shim = bench.build_shim(d) if tls else None
    hosts = args.routes // bench.ROUTES_PER_HOST
    target_host, target_path = bench.host(min(42, hosts - 1)), "/p7/bench"  # the harness's target route

    bconf = bench.write_backend_conf(d, ports["backend"])
    backend = bench.start_nginx("backend", bconf, d, ports["backend"], None)
    bench.check_route("backend", ports["backend"], target_host, target_path)

    servers, driver = [], None
    if "ramjet" in args.servers:
        # a private copy: a rebuild during the run cannot change what is measured, and perf resolves
        # symbols from this file
        shutil.copy2(args.ramjet, f"{d}/ramjet")
        args.ramjet_source, args.ramjet = args.ramjet, f"{d}/ramjet"
        routes = f"{d}/ramjet-routes.yaml"
        bench.write_ramjet_routes(routes, hosts, ports["backend"], cert, key)
        driver = bench.probe_driver(args, routes, d, (ports["probe_http"], ports["probe_https"], ports["probe_admin"]))
        log(f"ramjet io driver: {driver}")
        rj = bench.start_ramjet(args, "ramjet", routes, d, ports["ramjet_http"], ports["ramjet_https"],
                                ports["ramjet_admin"], io_driver=IO_DRIVER)
        servers.append({"name": "ramjet", "proc": rj, "pid": rj.pid, "threads": True, "uring": IO_DRIVER == "io-uring",
                        "what": f"1 worker, --io-driver {IO_DRIVER}: {driver}; perf and strace on the whole process"})
    if "nginx" in args.servers:
        nconf = bench.write_nginx_proxy_conf(d, "nginx", hosts, ports["nginx_http"], ports["nginx_https"],
                                             ports["backend"], cert, key)
        ng = bench.start_nginx("nginx", nconf, d, ports["nginx_http"], None)
        wpid = nginx_worker_pid(ng.pid)
        servers.append({"name": "nginx", "proc": ng, "pid": wpid, "threads": False, "uring": False,
                        "what": f"worker_processes 1; perf and strace on the worker, pid {wpid}"})

    for srv in servers:
        port = ports[f"{srv['name']}_{'https' if tls else 'http'}"]
        bench.check_route(srv["name"], port, target_host, target_path, tls=tls)
        srv["url"] = f"{'https' if tls else 'http'}://127.0.0.1:{port}{target_path}"
        srv["host"] = target_host
        srv["headers"] = ("Connection: close",) if args.shape == "close" else ()
        srv["env"] = {"LD_PRELOAD": shim, "BENCH_SNI": target_host} if tls else None
        if tls:
            srv["what"] += f"; TLS: {bench.tls_params(port, target_host, target_path)}"

    res = {}
    for srv in servers:
        log(f"== {srv['name']}")
        if args.warmup:
            run_load(args, srv, args.warmup, f"warmup {srv['name']}")
        res[srv["name"]] = {"perf": perf_phase(args, srv, d)}
        res[srv["name"]]["strace"] = strace_phase(args, srv, d)
    with open(f"{d}/results.json", "w") as f:
        json.dump(res, f, indent=1, default=str)

    shape = {"close": "plain HTTP, every request `Connection: close` (the harness's close section)",
             "https": "HTTPS keep-alive (the harness's tls section)",
             "keepalive": "plain HTTP keep-alive (the harness's http section)"}[args.shape]
    out = [f"# Where the CPU goes: shape `{args.shape}`, {shape}",
           f"wrk -t{args.threads} -c{args.connections} to {target_host}{target_path} ({args.routes} routes), "
           f"one nginx `return 200` backend, 127.0.0.1; perf record -e cpu-clock -F {args.freq} -g for "
           f"{args.duration} s, strace -c -f for {args.strace_duration} s (separate runs); "
           f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load average {open('/proc/loadavg').read().split()[0]}",
           ""]
    if len(servers) > 1:
        out += side_by_side(args, servers, res)
    for srv in servers:
        out += server_section(args, srv, res[srv["name"]]["perf"], res[srv["name"]]["strace"])
    PROCS.stop(backend)
    return out


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
