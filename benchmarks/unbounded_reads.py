"""What unbounded reads cost: cassette files that are not files, and the model proxy under abuse.

Each case runs in a fresh child process whose peak resident memory (`VmHWM`, less its
resident memory just before the case) is reported; the child's address space is capped
(`--cap`, 4 GiB by default), so a reader that would take more stops there with a
`MemoryError` (reported as "≥ cap"). `--old REV` runs the same cases against another revision
of `src/` (extracted with `git archive` into a temporary folder), for the before/after figures.

Cassettes (the child is the reader):

- **replay /dev/zero**, **verify /dev/zero**: a cassette whose one recording is a symbolic link
  to `/dev/zero`; `Cassette(root, "replay").lookup(...)`, then `verify_cassette(root)`;
- **replay sparse 8 GiB**: the recording is a sparse 8 GiB regular file (no disk used).

The model proxy (the child runs a `ModelProxy` with one trial whose upstream is a closed port;
this process is the client, so its own memory is not counted):

- **8 x 60 MB, wrong token**: 8 connections at once, each posting a 60 MB body with a token of
  no trial;
- **deflate bomb**: one request of the trial (its token) whose `deflate` body (~0.9 MB)
  inflates to 900 MiB;
- **3,000 idle**: 3,000 connections that send nothing, held 3 s; reported: how many the proxy
  kept open;
- **slowloris 500**: 500 connections sending their headers one byte every 0.5 s for 12 s
  (past the 10 s head limit); reported: how many were still open at the end;
- **200 unfinished bodies**: 200 requests of the trial promising 8 MB and sending 1 MB, held
  3 s (they are read: the token is good; the body limit of 60 s then ends them).

    python benchmarks/unbounded_reads.py                 # this tree
    python benchmarks/unbounded_reads.py --old c73c547   # the code before, for comparison
    python benchmarks/unbounded_reads.py --cases replay-dev-zero deflate-bomb

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024
CHILD_TIMEOUT = 120.0

_MEMORY = """
def vm(name):
    for line in open("/proc/self/status"):
        if line.startswith(name + ":"):
            return int(line.split()[1]) * 1024
"""

CASSETTE_CHILD = (
    _MEMORY
    + """
import json, os, sys
from pathlib import Path
from trialkit.models.base import ModelRequest, ModelResponse
from trialkit.models.cassette import Cassette
from trialkit.models.cassette_tools import verify_cassette
from trialkit.transcript import Message

root, case = Path(sys.argv[1]), sys.argv[2]
request = ModelRequest(messages=[Message(role="user", content="hi")])
answer = ModelResponse(message=Message(role="assistant", content="hello"))
Cassette(root, "record").record("openai/m", request, answer, trial=0, occurrence=0)
[path] = root.glob("*/*/*.json")
path.unlink()
if case.endswith("dev-zero"):
    path.symlink_to("/dev/zero")
else:
    with path.open("wb") as fh:
        fh.truncate(8 * 1024**3)
base = vm("VmRSS")
try:
    if case.startswith("verify"):
        outcome = "; ".join(verify_cassette(root))
    else:
        Cassette(root, "replay").lookup("openai/m", request, trial=0, occurrence=0)
        outcome = "returned"
except BaseException as exc:
    outcome = f"{type(exc).__name__}: {exc}"
print(json.dumps({"peak": vm("VmHWM") - base, "outcome": outcome[:150]}))
"""
)

PROXY_CHILD = (
    _MEMORY
    + """
import json, sys
from trialkit.capture.proxy import ModelProxy
from trialkit.models.context import ModelSettings
from trialkit.transcript import TranscriptRecorder

proxy = ModelProxy().start()
upstreams = {"anthropic": "http://127.0.0.1:9", "openai": "http://127.0.0.1:9/v1"}
recorder = TranscriptRecorder(task_id="t", trial_index=0)
trial = proxy.open_trial(recorder, ModelSettings(), upstreams)
print(json.dumps({"port": proxy.port, "token": trial.token, "base": vm("VmRSS")}), flush=True)
for line in sys.stdin:
    state = {"hwm": vm("VmHWM"), "open": getattr(proxy, "open_connections", None)}
    print(json.dumps(state), flush=True)
"""
)


def _limit(cap: int) -> Callable[[], None]:
    def set_cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    return set_cap


def _head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {length}\r\n\r\n"
    ).encode()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=60)


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)  # a socket with a timeout would wait for data first
    try:
        return sock.recv(65536, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"" or _drained(sock)
    except BlockingIOError:
        return False
    except OSError:
        return True


def _drained(sock: socket.socket) -> bool:
    """An answer was sent: read it, then see whether the close follows."""
    for _ in range(1000):
        try:
            if sock.recv(65536, socket.MSG_DONTWAIT) == b"":
                return True
        except BlockingIOError:
            return False
    return False


def _status(sock: socket.socket) -> str:
    with contextlib.suppress(OSError):
        sock.settimeout(30)
        first = sock.recv(64)
        return first.split(b" ", 2)[1].decode() if first.startswith(b"HTTP/") else "closed"
    return "reset"


# -- the attacks (this process is the client) -----------------------------------------------------


def wrong_token_bodies(port: int, token: str) -> str:
    body = memoryview(b"x" * (60 * 1000 * 1000))
    statuses: list[str] = []

    def one() -> None:
        with _connect(port) as sock:
            sock.sendall(_head("/trialkit/wrong/anthropic/v1/messages", len(body)))
            with contextlib.suppress(OSError):
                sock.sendall(body)
            statuses.append(_status(sock))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    return "answers: " + ", ".join(sorted(statuses))


def deflate_bomb(port: int, token: str) -> str:
    compressor, parts = zlib.compressobj(9), []
    chunk = b"\0" * MiB
    for _ in range(900):
        parts.append(compressor.compress(chunk))
    body = b"".join([*parts, compressor.flush()])
    with _connect(port) as sock:
        sock.sendall(_head(f"/trialkit/{token}/anthropic/v1/messages", len(body))[:-2])
        sock.sendall(b"content-encoding: deflate\r\n\r\n" + body)
        return f"{len(body):,} bytes sent; answer {_status(sock)}"


def idle_connections(port: int, token: str) -> str:
    socks = [_connect(port) for _ in range(3000)]
    time.sleep(3)
    still = sum(not _closed_by_server(sock) for sock in socks)
    for sock in socks:
        sock.close()
    return f"{still} of 3000 still open after 3 s"


def slowloris(port: int, token: str) -> str:
    head = _head(f"/trialkit/{token}/anthropic/v1/messages", 10)
    socks = [_connect(port) for _ in range(500)]
    for step in range(24):  # 12 s
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.send(head[step : step + 1])
        time.sleep(0.5)
    still = sum(not _closed_by_server(sock) for sock in socks)
    for sock in socks:
        sock.close()
    return f"{still} of 500 still open after 12 s"


def unfinished_bodies(port: int, token: str) -> str:
    piece = b"x" * MiB
    socks = []
    for _ in range(200):
        sock = _connect(port)
        sock.sendall(_head(f"/trialkit/{token}/anthropic/v1/messages", 8 * MiB) + piece)
        socks.append(sock)
    time.sleep(3)
    still = sum(not _closed_by_server(sock) for sock in socks)
    for sock in socks:
        sock.close()
    return f"{still} of 200 still open after 3 s"


PROXY_CASES: dict[str, Callable[[int, str], str]] = {
    "wrong-token-bodies": wrong_token_bodies,
    "deflate-bomb": deflate_bomb,
    "idle-3000": idle_connections,
    "slowloris-500": slowloris,
    "unfinished-bodies": unfinished_bodies,
}
CASSETTE_CASES = ("replay-dev-zero", "verify-dev-zero", "replay-sparse")


def run_cassette_case(case: str, src: Path, cap: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, "-c", CASSETTE_CHILD, str(Path(folder) / "cassette"), case],
            env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
            preexec_fn=_limit(cap),
        )
    if done.returncode != 0 or not done.stdout.strip():
        return {"peak": None, "outcome": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_proxy_case(case: str, src: Path, cap: int) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, "-c", PROXY_CHILD],
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_limit(cap),
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        start = json.loads(child.stdout.readline())
        outcome = PROXY_CASES[case](start["port"], start["token"])
        child.stdin.write("report\n")
        child.stdin.flush()
        state = json.loads(child.stdout.readline() or "{}")
        peak = state["hwm"] - start["base"] if "hwm" in state else None
        return {"peak": peak, "outcome": outcome, "open": state.get("open")}
    finally:
        child.kill()
        child.wait(10)


def _old_tree(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", metavar="REV", help="run against this revision's src/")
    parser.add_argument("--cap", type=int, default=4096, help="address-space cap, MiB")
    parser.add_argument("--cases", nargs="*", default=[*CASSETTE_CASES, *PROXY_CASES])
    options = parser.parse_args()
    cap = options.cap * MiB
    with tempfile.TemporaryDirectory() as folder:
        src = _old_tree(options.old, Path(folder)) if options.old else ROOT / "src"
        print(f"code: {options.old or 'this tree'}; address space capped at {options.cap} MiB")
        for case in options.cases:
            started = time.perf_counter()
            if case in CASSETTE_CASES:
                result = run_cassette_case(case, src, cap)
            else:
                result = run_proxy_case(case, src, cap)
            peak = result["peak"]
            shown = "?" if peak is None else f"{peak / MiB:,.1f} MiB"
            opened = f", proxy says {result['open']} open" if result.get("open") is not None else ""
            took = time.perf_counter() - started
            line = f"{case:20} peak +{shown:>12}  {took:5.1f} s  {result['outcome']}{opened}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
