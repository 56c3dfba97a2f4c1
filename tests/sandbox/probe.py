"""Run `probe_suite.py` under `--offline` inside the outer namespace (see outside.py), with
listeners where nothing may arrive, and write what happened to OUT/summary.json.

    python -m tests.sandbox.probe cli|library OUT [--wrap CMD] [--no-userns] [--task ID ...]

`cli` runs `trialkit run --offline` (which enters a namespace of its own); `library` runs the
suite with `Runner(offline=True)` in a child process (no namespace: the audit hook alone).
`--wrap` runs trialkit under CMD (e.g. setpriv dropping CAP_SYS_ADMIN); `--no-userns` forbids
new user namespaces in the outer one first.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.sandbox.outside import OUTER_ADDRESS, nameservers
from tests.sandbox.ways import BANNER

SUITE = Path(__file__).with_name("probe_suite.py")


class Listeners:
    """Counts what reaches the outer address (TCP, UDP), the DNS servers' addresses (UDP and
    TCP 53), and the loopback service (which answers with the banner)."""

    def __init__(self) -> None:
        self.counts = {"tcp": 0, "udp": 0, "dns": 0, "local": 0}
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        tcp = self._socket(socket.SOCK_STREAM, (OUTER_ADDRESS, 0))
        self.port = tcp.getsockname()[1]
        self._serve(tcp, "tcp")
        self._serve(self._socket(socket.SOCK_DGRAM, (OUTER_ADDRESS, self.port)), "udp")
        for server in nameservers():
            self._serve(self._socket(socket.SOCK_DGRAM, (server, 53)), "dns")
            self._serve(self._socket(socket.SOCK_STREAM, (server, 53)), "dns")
        local = self._socket(socket.SOCK_STREAM, ("127.0.0.1", 0))
        self.local_port = local.getsockname()[1]
        self._serve(local, "local")
        with socket.socket() as free:  # a port nothing listens on yet
            free.bind(("127.0.0.1", 0))
            self.late_port = free.getsockname()[1]
        self.late_started = False

    def _socket(self, kind: int, address: tuple[str, int]) -> socket.socket:
        sock = socket.socket(socket.AF_INET, kind)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        if kind == socket.SOCK_STREAM:
            sock.listen(64)
        self.sockets.append(sock)
        return sock

    def _serve(self, sock: socket.socket, name: str) -> None:
        def loop() -> None:
            while True:
                try:
                    if sock.type == socket.SOCK_DGRAM:
                        sock.recvfrom(65536)
                    else:
                        conn, _ = sock.accept()
                        if name == "local":  # an HTTP answer to the request, read first
                            _read_request(conn)
                            conn.sendall(
                                b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                                % (len(BANNER), BANNER.encode())
                            )
                        conn.close()
                except OSError:
                    return
                with self.lock:
                    self.counts[name] += 1
                    start_late = name == "local" and not self.late_started
                    self.late_started = self.late_started or start_late
                if start_late:  # the run is under way: its namespace was entered before
                    late = self._socket(socket.SOCK_STREAM, ("127.0.0.1", self.late_port))
                    self._serve(late, "local")

        threading.Thread(target=loop, daemon=True).start()


def _read_request(conn: socket.socket) -> None:
    conn.settimeout(5)
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = conn.recv(4096)
        if not chunk:
            return
        request += chunk


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["cli", "library", "run-library"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--wrap", default="")
    parser.add_argument("--no-userns", action="store_true")
    parser.add_argument("--task", action="append", default=[])
    parser.add_argument("--concurrency", default="1")
    args = parser.parse_args()
    if args.mode == "run-library":
        return run_library(args.out, args.task, int(args.concurrency))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.no_userns:
        Path("/proc/sys/user/max_user_namespaces").write_text("0")
    listeners = Listeners()
    env = {
        **os.environ,
        "PROBE_TARGET": f"{OUTER_ADDRESS}:{listeners.port}",
        "PROBE_LOCAL": f"127.0.0.1:{listeners.local_port}",
        "PROBE_LATE": f"127.0.0.1:{listeners.late_port}",
    }
    tasks = [arg for task in args.task for arg in ("--task", task)]
    if args.mode == "cli":
        command = [sys.executable, "-m", "trialkit", "run", str(SUITE), "--offline"]
        command += ["--no-progress", "--store", str(args.out / "store.db")]
        command += ["--json", str(args.out / "report.json"), "--concurrency", args.concurrency]
        command += tasks
    else:
        command = [sys.executable, "-m", "tests.sandbox.probe", "run-library", str(args.out)]
        command += [*tasks, "--concurrency", args.concurrency]
    started = time.perf_counter()
    done = subprocess.run(
        [*shlex.split(args.wrap), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    time.sleep(0.3)  # a datagram or connection still on its way is counted too
    with listeners.lock:
        counts = dict(listeners.counts)
    summary = {
        "exit": done.returncode,
        "stdout": done.stdout[-6000:],
        "stderr": done.stderr[-6000:],
        "seconds": round(time.perf_counter() - started, 2),
        "nameservers": nameservers(),
        **counts,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))


def run_library(out: Path, tasks: list[str], concurrency: int) -> None:
    import anyio

    from tests.sandbox.probe_suite import suite
    from trialkit.run.runner import Runner

    runner = Runner(offline=True, concurrency=concurrency, task_ids=tasks)
    report = anyio.run(runner.run, suite)
    (out / "report.json").write_text(report.to_json())


if __name__ == "__main__":
    main()
