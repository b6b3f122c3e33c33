#!/usr/bin/env python3
"""What a pin or a release costs through the admin API, thread by thread.

Starts ramjet (release build, one worker) with a static routes file of --routes routes (10 paths per
host), then sends --calls alternating `POST /admin/rollback {"generation": 1}` and
`DELETE /admin/rollback` over one keep-alive connection, and prints each thread's CPU per call
(from /proc/<pid>/task/*/schedstat) and the wall time per call. Every call must answer 200.

    benches/admin-pins/run.py --ramjet target/release/ramjet --routes 10000 --calls 1000
"""
import argparse, http.client, json, os, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--ramjet", default="target/release/ramjet")
ap.add_argument("--routes", type=int, default=10000)
ap.add_argument("--calls", type=int, default=1000)
ap.add_argument("--admin-port", type=int, default=28254)
args = ap.parse_args()

lines = ["backends:", '  b: { endpoints: ["127.0.0.1:9"] }', "routes:"]
lines += [f"  - {{ host: h{h}.test, path: /p{p}, backend: b }}" for h in range(args.routes // 10) for p in range(10)]
routes = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
routes.write("\n".join(lines) + "\n")
routes.close()
proc = subprocess.Popen([args.ramjet, "--static-routes", routes.name, "--http-addr", "127.0.0.1:0",
                         "--admin-addr", f"127.0.0.1:{args.admin_port}", "--workers", "1"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    conn = http.client.HTTPConnection("127.0.0.1", args.admin_port)
    for _ in range(100):
        try:
            conn.request("GET", "/readyz")
            ready = conn.getresponse()
            ready.read()
            if ready.status == 200:
                break
        except OSError:
            conn.close()
        time.sleep(0.1)

    def cpu():
        out = {}
        for t in os.listdir(f"/proc/{proc.pid}/task"):
            comm = open(f"/proc/{proc.pid}/task/{t}/comm").read().strip()
            out[f"{comm}/{t}"] = int(open(f"/proc/{proc.pid}/task/{t}/schedstat").read().split()[0])
        return out

    before, started = cpu(), time.monotonic()
    for i in range(args.calls):
        if i % 2 == 0:
            conn.request("POST", "/admin/rollback", body=json.dumps({"generation": 1}))
        else:
            conn.request("DELETE", "/admin/rollback")
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            sys.exit(f"call {i}: {answer.status} {body[:200]!r}")
    wall, after = time.monotonic() - started, cpu()
    total = 0.0
    for name in sorted(after):
        per_call = (after[name] - before.get(name, 0)) / 1e3 / args.calls
        total += per_call
        if per_call >= 0.05:
            print(f"{name:28s} {per_call:8.1f} µs CPU per call")
    print(f"{'all threads':28s} {total:8.1f} µs CPU per call")
    print(f"{'wall':28s} {wall / args.calls * 1e6:8.1f} µs per call")
finally:
    proc.terminate()
    proc.wait()
    os.unlink(routes.name)
