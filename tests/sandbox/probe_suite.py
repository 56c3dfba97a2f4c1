"""An agent that tries, task by task, one way out of the machine (see probe.py).

Each task's input names the way; the agent reports what it saw, and a task's graders pass when
the way was closed at the kernel (inside a loopback-only namespace). Ways the audit hook sees
raise `OfflineRefused` in the agent and make the trial an error. Targets come from the
environment: `PROBE_TARGET` (host:port outside, listened on for TCP and UDP) and `PROBE_LOCAL`
(host:port of a TCP service on the outer namespace's loopback) and `PROBE_LATE` (another,
listening only once `PROBE_LOCAL` was reached).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from tests.sandbox.ways import CLOSED_AT_THE_KERNEL, REACHABLE
from trialkit import Suite, Task, graders

HOST, _, PORT_TEXT = os.environ.get("PROBE_TARGET", "198.18.0.1:9").rpartition(":")
PORT = int(PORT_TEXT)
LOCAL_HOST, _, LOCAL_PORT = os.environ.get("PROBE_LOCAL", "127.0.0.1:9").rpartition(":")
LATE_HOST, _, LATE_PORT = os.environ.get("PROBE_LATE", "127.0.0.1:9").rpartition(":")
CHILD_S = "5"  # a child's own time limit, so no step here can hang

_jobs: queue.Queue[queue.Queue[str]] = queue.Queue()


def _serve_jobs() -> None:
    """A thread started when this module is imported (before the run): it connects for
    whichever trial asks, and belongs to none."""
    while True:
        answer = _jobs.get()
        try:
            socket.create_connection((HOST, PORT), timeout=3).close()
            answer.put("connected")
        except OSError as exc:
            answer.put(f"{type(exc).__name__}: {exc}")


threading.Thread(target=_serve_jobs, name="pre-started", daemon=True).start()


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)


def udp_sendto() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"probe", (HOST, PORT))
    return "sent"


def udp_sendmsg() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendmsg([b"probe"], [], 0, (HOST, PORT))
    return "sent"


def fastopen() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        sock.sendto(b"GET / HTTP/1.0\r\n\r\n", socket.MSG_FASTOPEN, (HOST, PORT))
    return "sent"


def thread() -> str:
    answer: queue.Queue[str] = queue.Queue()
    _jobs.put(answer)
    return answer.get(timeout=10)


def localhost_name() -> str:
    socket.getaddrinfo("probe.localhost", 80)
    return "resolved"


def fork() -> str:
    pid = os.fork()
    if pid == 0:  # the child shrugs off what it gets and exits 0
        with contextlib.suppress(BaseException):
            socket.create_connection((HOST, PORT), timeout=3).close()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return f"child exited {status}"


def curl() -> str:
    done = _run(["curl", "-sS", "--max-time", CHILD_S, f"http://{HOST}:{PORT}/"])
    return f"curl exit {done.returncode}: {done.stderr.strip()}"


def python_child() -> str:
    code = f"import socket; socket.create_connection(({HOST!r}, {PORT}), timeout={CHILD_S})"
    done = _run([sys.executable, "-c", code])
    return f"child exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]}"


def udp_child() -> str:
    code = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        f"s.sendto(b'probe', ({HOST!r}, {PORT}))"
    )
    done = _run([sys.executable, "-c", code])
    return f"child exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]}"


def os_system() -> str:
    status = os.system(f"curl -s --max-time {CHILD_S} http://{HOST}:{PORT}/ > /dev/null 2>&1")
    return f"system exit {os.waitstatus_to_exitcode(status)}"


def ctypes_connect() -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    address = struct_sockaddr_in(HOST, PORT)
    result = libc.connect(fd, address, len(address))
    error = ctypes.get_errno()
    os.close(fd)
    return f"connect {result}, errno {error} ({os.strerror(error)})"


def struct_sockaddr_in(host: str, port: int) -> bytes:
    return (
        socket.AF_INET.to_bytes(2, sys.byteorder)
        + port.to_bytes(2, "big")
        + socket.inet_aton(host)
        + bytes(8)
    )


def dns_child() -> str:
    done = _run(["getent", "hosts", "probe-offline.example.com"])
    return f"getent exit {done.returncode}"


def no_route() -> str:
    with open("/proc/net/dev", encoding="ascii") as dev:
        names = [line.split(":")[0].strip() for line in dev.read().splitlines()[2:]]
    with open("/proc/net/route", encoding="ascii") as table:
        routes = len(table.read().splitlines()[1:])
    return f"interfaces: {';'.join(names)}; routes: {routes}"


def loopback_python() -> str:
    return _ask(LOCAL_HOST, int(LOCAL_PORT))


def _ask(host: str, port: int) -> str:
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):  # the service closes once it has answered
            answer += chunk
        return answer.decode()


def late_python() -> str:
    return _ask(LATE_HOST, int(LATE_PORT))


def loopback_curl() -> str:
    done = _run(["curl", "-sS", "--max-time", CHILD_S, f"http://{LOCAL_HOST}:{LOCAL_PORT}/"])
    return f"curl exit {done.returncode}: {done.stdout.strip()} {done.stderr.strip()}"


def _wait_for_bystander() -> None:
    for _ in range(200):  # at most 10 s
        if _bystander_in.is_set():
            return
        time.sleep(0.05)


_bystander_in = threading.Event()
_asked = threading.Event()


def asks_thread() -> str:
    _wait_for_bystander()  # so that another trial is in flight when the thread is refused
    try:
        return thread()
    finally:
        _asked.set()


def bystander() -> str:
    _bystander_in.set()
    _asked.wait(timeout=10)
    return "stood by"


WAYS: dict[str, Callable[[], str]] = {
    way.__name__: way
    for way in (
        udp_sendto,
        udp_sendmsg,
        fastopen,
        thread,
        localhost_name,
        fork,
        curl,
        python_child,
        udp_child,
        os_system,
        ctypes_connect,
        dns_child,
        no_route,
        loopback_python,
        loopback_curl,
        late_python,
        asks_thread,
        bystander,
    )
}
EXPECTED = {**CLOSED_AT_THE_KERNEL, **REACHABLE}


def agent(way: str) -> str:
    return WAYS[way]()


suite = Suite(
    id="offline-probe",
    harness=agent,
    trials=1,
    timeout=60,
    tasks=[
        Task(id=way, input=way, graders=[graders.contains(EXPECTED.get(way, ""))]) for way in WAYS
    ],
)
