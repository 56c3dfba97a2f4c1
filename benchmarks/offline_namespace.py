"""What `--offline`'s network namespace costs: entering it, and a connection through its bridge.

    python benchmarks/offline_namespace.py [--rounds 3] [--connections 100]

Needs Linux and either CAP_SYS_ADMIN or unprivileged user namespaces. Everything stays on
loopback. Three measurements, each in fresh child processes:

- **enter**: the time `trialkit.sandbox.netns.enter_loopback_only()` takes in a new process,
  the module imported (fork the helper, unshare, bring `lo` up, list and bridge this machine's
  loopback listeners),
  the median of `--rounds`; and, for scale, how long reading /proc/net/tcp{,6} takes here (the
  helper reads it once, and its cost grows with the sockets of the machine);
- **per connection**: a loopback server that reads a small HTTP request and answers 1 KB, then
  closes; a client makes `--connections` connections one after another (connect, request, read
  to the end) directly, or from inside the namespace through the bridge; p50 and p95 per
  connection;
- **throughput**: the same with a 16 MB answer, MB/s.

The direct and bridged clients take turns (direct, bridged, bridged, direct, ...) so that the
machine's drift falls on both alike. Every child has a time limit.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading

CLIENT = r"""
import json, socket, sys, time
port, count, size, confined = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if confined == "1":
    from trialkit.sandbox.netns import enter_loopback_only
    enter_loopback_only()
times = []
for _ in range(count):
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        got = 0
        while chunk := sock.recv(1 << 16):
            got += len(chunk)
    times.append(time.perf_counter() - start)
    assert got == size, (got, size)
print(json.dumps(times))
"""

ENTER = r"""
import json, time
from trialkit.sandbox.netns import enter_loopback_only
start = time.perf_counter()
namespace = enter_loopback_only()
entered = time.perf_counter() - start
start = time.perf_counter()
for name in ("/proc/net/tcp", "/proc/net/tcp6"):
    open(name).read()
print(json.dumps({"enter": entered, "proc_read": time.perf_counter() - start,
                  "bridged": len(namespace.bridged), "user": namespace.user_namespace}))
"""


def serve(size: int) -> tuple[socket.socket, int]:
    server = socket.create_server(("127.0.0.1", 0))
    answer = b"x" * size

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                request = b""
                while b"\r\n\r\n" not in request and (chunk := conn.recv(4096)):
                    request += chunk
                conn.sendall(answer)

    threading.Thread(target=loop, daemon=True).start()
    return server, server.getsockname()[1]


def child(code: str, *args: str) -> object:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip().splitlines()[-1])
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=100)
    args = parser.parse_args()

    entries = [child(ENTER) for _ in range(args.rounds)]
    enter = statistics.median(e["enter"] for e in entries) * 1000  # type: ignore[index]
    proc = statistics.median(e["proc_read"] for e in entries) * 1000  # type: ignore[index]
    user = entries[0]["user"]  # type: ignore[index]
    print(
        f"enter: {enter:.1f} ms median of {args.rounds} (user namespace: {user}); "
        f"reading /proc/net/tcp{{,6}} here: {proc:.1f} ms"
    )

    for label, size, count in (
        ("1 KB answers", 1024, args.connections),
        ("16 MB answers", 16 << 20, max(3, args.connections // 20)),
    ):
        server, port = serve(size)
        runs: dict[str, list[float]] = {"direct": [], "bridged": []}
        order = ["0", "1", "1", "0"] * args.rounds
        for confined in order:
            times = child(CLIENT, str(port), str(count), str(size), confined)
            runs["bridged" if confined == "1" else "direct"] += times  # type: ignore[arg-type]
        server.close()
        for name, times in runs.items():
            times.sort()
            p50, p95 = times[len(times) // 2] * 1000, times[int(len(times) * 0.95)] * 1000
            rate = size / statistics.median(times) / 1e6
            print(
                f"{label}, {name:7}: p50 {p50:.2f} ms, p95 {p95:.2f} ms per connection, "
                f"{rate:.0f} MB/s ({len(times)} connections)"
            )


if __name__ == "__main__":
    main()
