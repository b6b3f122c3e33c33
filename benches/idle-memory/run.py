#!/usr/bin/env python3
"""Memory of idle keep-alive client connections: ramjet (buffers released after --idle-release-after,
and with the release pushed out of reach) and nginx, one worker each, side by side.

Each round opens N connections, sends one request on each and reads its answer, waits while all N
sit idle, samples the server's RSS, closes them all, waits, and samples again. The figures are the
RSS growth per idle connection and the RSS left after the connections closed, against the start.

    benches/idle-memory/run.sh [--connections 5000] [--rounds 6]
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REQUEST = b"GET /idle HTTP/1.1\r\nHost: bench\r\n\r\n"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def read_answer(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError("closed before answering")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += sock.recv(4096)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.decode(errors="replace"))


def one_round(port, n):
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(30)
        conns.append(s)
    for s in conns:
        s.sendall(REQUEST)
    for s in conns:
        read_answer(s)
    return conns


class Server:
    def __init__(self, name, argv, port, pid_of_worker=None, env=None):
        self.name = name
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        self.port = port
        wait_port(port)
        time.sleep(0.5)
        self.pid = pid_of_worker() if pid_of_worker else self.proc.pid

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def ramjet(binary, workdir, release_after):
    port, admin = free_port(), free_port()
    routes = os.path.join(workdir, "idle-routes.yaml")
    with open(routes, "w") as f:
        f.write('backends:\n  hi: { respond: { status: 200, body: "hi" } }\nroutes:\n  - { path: /, backend: hi }\n')
    argv = [binary, "--static-routes", routes, "--workers", "1", "--http-addr", f"127.0.0.1:{port}",
            "--admin-addr", f"127.0.0.1:{admin}", "--keepalive-timeout", "600s",
            "--idle-release-after", release_after, "--access-log", "off"]
    return Server(f"ramjet (release after {release_after})", argv, port)


def nginx(workdir):
    port = free_port()
    conf = os.path.join(workdir, "nginx-idle.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process on; worker_processes 1; pid {workdir}/nginx-idle.pid;
error_log /dev/null; events {{ worker_connections 65536; }}
http {{ access_log off; keepalive_timeout 600s; keepalive_requests 100000;
  server {{ listen 127.0.0.1:{port}; location / {{ return 200 "hi"; }} }} }}
""")

    def worker():
        out = subprocess.run(["pgrep", "-f", "nginx: worker process"], capture_output=True, text=True).stdout.split()
        children = [p for p in out if open(f"/proc/{p}/stat").read().split()[3] == str(server_proc[0].pid)]
        return int(children[0])

    server_proc = []

    class Nginx(Server):
        def __init__(self):
            self.name = "nginx"
            self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", workdir], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            server_proc.append(self.proc)
            self.port = port
            wait_port(port)
            time.sleep(0.5)
            self.pid = worker()

    return Nginx()


def measure(server, n, rounds, settle, after_close):
    conns = one_round(server.port, 1)
    for s in conns:
        s.close()
    time.sleep(after_close)
    start = rss_kib(server.pid)
    rows = []
    for r in range(rounds):
        conns = one_round(server.port, n)
        time.sleep(settle)
        idle = rss_kib(server.pid)
        for s in conns:
            s.close()
        time.sleep(after_close)
        after = rss_kib(server.pid)
        rows.append((r + 1, idle, after))
    return start, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--settle", type=float, default=15.0, help="seconds idle before sampling (two buffer-trim periods)")
    ap.add_argument("--after-close", type=float, default=12.0, help="seconds after closing before sampling")
    ap.add_argument("--binary", default="target/release/ramjet")
    ap.add_argument("--no-nginx", action="store_true")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="ramjet-idle-")
    servers = [lambda: ramjet(args.binary, workdir, "1s"), lambda: ramjet(args.binary, workdir, "1h")]
    if not args.no_nginx and shutil.which("nginx"):
        servers.append(lambda: nginx(workdir))
    print(f"{args.connections} idle keep-alive connections per round, {args.rounds} rounds, one worker each; "
          f"RSS sampled {args.settle}s after the last answer and {args.after_close}s after closing")
    print()
    print("| server | RSS at start | per idle connection (median of rounds) | RSS after closing, last round | after closing vs start |")
    print("|---|---|---|---|---|")
    for make in servers:
        server = make()
        try:
            start, rows = measure(server, args.connections, args.rounds, args.settle, args.after_close)
        finally:
            server.stop()
        per_conn = sorted((idle - start) * 1024 / args.connections for _, idle, _ in rows)
        median = per_conn[len(per_conn) // 2]
        last_after = rows[-1][2]
        print(f"| {server.name} | {start / 1024:.1f} MiB | {median / 1024:.2f} KiB | {last_after / 1024:.1f} MiB | "
              f"{last_after / start:.2f}x |", flush=True)
        for r, idle, after in rows:
            print(f"|   round {r} | | idle {idle / 1024:.1f} MiB | {after / 1024:.1f} MiB | |", flush=True)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
