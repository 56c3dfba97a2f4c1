"""Canaries: attacks a sandbox must hold against, run for real against a provider
(`trialkit sandbox check`). Each canary needs a capability; one the provider claims and that
breaks fails the check, one it does not claim is shown for what it is and fails nothing. The
dangerous ones (a fork bomb, a memory hog) are run only where the limit is claimed.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import signal
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import anyio

from trialkit.sandbox.base import (
    Capabilities,
    Limits,
    NetworkMode,
    NetworkPolicy,
    Sandbox,
    SandboxError,
    SandboxPolicy,
    SandboxProvider,
)

__all__ = ["CANARIES", "CanaryResult", "ProviderReport", "check_provider", "markdown_table"]

Status = Literal["held", "broken", "not claimed", "error"]

_NET_PROBE = """
import json, socket, sys, time
def reach(host, port):
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
            answer = s.recv(100).decode(errors="replace")
        return {"ok": answer.startswith("HTTP/"), "s": time.monotonic() - started}
    except OSError as exc:
        return {"ok": False, "error": str(exc), "s": time.monotonic() - started}
print(json.dumps({name: reach(host, int(port)) for name, host, port in
                  (arg.split(",") for arg in sys.argv[1:])}))
"""


@dataclass
class CanaryResult:
    name: str
    status: Status
    detail: str = ""


@dataclass
class ProviderReport:
    provider: str
    unavailable: str | None = None
    results: list[CanaryResult] = field(default_factory=list)

    @property
    def failed(self) -> list[CanaryResult]:
        return [r for r in self.results if r.status in ("broken", "error")]


@dataclass
class _Context:
    provider: SandboxProvider
    caps: Capabilities
    workspace: Path
    allowed_port: int
    forbidden_port: int

    def policy(self, *, network: NetworkMode = "none", **limits: float | int) -> SandboxPolicy:
        """The provider's default policy (its image, its user), with this network and these
        limits."""
        return replace(
            self.provider.default_policy(),
            network=NetworkPolicy(network),
            grader_network=NetworkPolicy(network),
            limits=Limits(**limits),  # type: ignore[arg-type]
        )

    def sandbox_network(self) -> NetworkMode:
        if "model-only" in self.caps.network:
            return "model-only"
        if "none" in self.caps.network:
            return "none"
        return sorted(self.caps.network)[0]


Canary = Callable[[_Context, Sandbox], Awaitable[tuple[bool, str]]]


@dataclass(frozen=True)
class _Spec:
    name: str
    title: str
    claimed: Callable[[Capabilities], bool]
    run: Canary
    limits: dict[str, float | int] = field(default_factory=dict)
    dangerous: bool = False


async def _secret_file(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    secret = secrets.token_hex(16)
    folder = Path(tempfile.mkdtemp(prefix="trialkit-canary-", dir=Path.home()))
    try:
        path = folder / "credentials"
        path.write_text(secret)
        paths = [str(path), "/etc/shadow", "/etc/gshadow", "/etc/sudoers"]
        script = "; ".join(f"cat {p} 2>/dev/null" for p in paths)
        result = await sandbox.exec(["sh", "-c", script])
        leaked = secret in result.stdout_text or ":" in result.stdout_text
        return (not leaked, "read a secret outside the workspace" if leaked else "unreadable")
    finally:
        _remove(folder)


async def _write_outside(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    folder = Path(tempfile.mkdtemp(prefix="trialkit-canary-"))
    targets = [folder / "written", Path("/usr/trialkit-canary"), Path.home() / "trialkit-canary"]
    try:
        inside = f"{sandbox.workspace}/canary-inside"
        script = "; ".join(f"echo x > {t} 2>/dev/null" for t in [*targets, inside])
        await sandbox.exec(["sh", "-c", script])
        written = [str(t) for t in targets if t.exists()]
        inside_ok = (ctx.workspace / "canary-inside").exists()
        if written:
            return False, f"wrote {', '.join(written)}"
        if not inside_ok:
            return False, "could not write the workspace either"
        return True, "read-only or private outside the workspace"
    finally:
        _remove(folder)
        for target in targets[1:]:
            with contextlib.suppress(OSError):
                target.unlink()


async def _network(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    probes = [
        f"host,127.0.0.1,{ctx.forbidden_port}",
        "other,192.0.2.1,80",
        f"allowed,127.0.0.1,{ctx.allowed_port}",
    ]
    result = await sandbox.exec(["python3", "-c", _NET_PROBE, *probes], timeout=30)
    try:
        seen = json.loads(result.stdout_text)
    except ValueError:
        return False, f"probe did not run: {result.stderr_text.strip()[-200:]}"
    problems = []
    if seen["host"]["ok"]:
        problems.append("reached a host service on 127.0.0.1")
    if seen["other"]["ok"] or seen["other"]["s"] > 1.0:
        problems.append(f"another address did not fail at once ({seen['other']['s']:.1f} s)")
    if sandbox.policy.network.mode == "model-only" and not seen["allowed"]["ok"]:
        problems.append(f"the model proxy's URL failed: {seen['allowed'].get('error')}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{sandbox.policy.network.mode}: only the allowed URL"


async def _env_and_processes(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    marker = f"60.{secrets.randbelow(10**9):09d}"
    os.environ["TRIALKIT_CANARY_SECRET"] = marker
    host = await anyio.open_process(
        ["sleep", marker], stdin=None, stdout=None, stderr=None, start_new_session=True
    )
    try:
        script = "env; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"
        result = await sandbox.exec(["sh", "-c", script])
    finally:
        os.environ.pop("TRIALKIT_CANARY_SECRET", None)
        host.kill()
        await host.aclose()
    seen = []
    if "TRIALKIT_CANARY_SECRET" in result.stdout_text:
        seen.append("a host environment variable")
    if f"sleep {marker}" in result.stdout_text:
        seen.append("a host process")
    return (not seen, f"saw {' and '.join(seen)}" if seen else "invisible")


async def _orphans(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    seconds = 300 + secrets.randbelow(600)
    marker = f"{seconds}.{secrets.randbelow(10**6):06d}"
    script = f"setsid sleep {marker} & ( sleep {marker} & ) ; nohup sleep {marker} >/dev/null &"
    await sandbox.exec(["sh", "-c", script + " echo started"], timeout=10)
    return await _none_left(marker)


async def _none_left(marker: str) -> tuple[bool, str]:
    await anyio.sleep(0.2)
    left = list(_processes_with(f"sleep\0{marker}"))
    for pid in left:  # this check leaves nothing behind either
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return (not left, f"{len(left)} process(es) outlived the command" if left else "none left")


async def _fork_bomb(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    result = await sandbox.exec(["sh", "-c", "f() { f & f & wait; }; f"], timeout=5)
    if result.limit == "processes":
        return True, "limit processes"
    return False, f"ended with exit {result.returncode}, limit {result.limit}"


async def _memory_hog(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    script = "x = []\nwhile True: x.append(bytearray(1 << 20)); x[-1][::4096] = b'x' * 256"
    result = await sandbox.exec(["python3", "-c", script], timeout=60)
    if result.limit == "memory":
        return True, "limit memory"
    return False, f"ended with exit {result.returncode}, limit {result.limit}"


async def _output_cap(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    result = await sandbox.exec(["sh", "-c", "yes"], output_bytes=100_000, timeout=30)
    if result.limit == "output" and len(result.stdout) <= 100_000 and result.stdout_truncated:
        return True, "limit output, 100,000 bytes kept"
    return False, f"limit {result.limit}, {len(result.stdout):,} bytes kept"


async def _time_cap(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    result = await sandbox.exec(["sleep", "60"], timeout=1.0)
    if result.limit == "wall_clock" and result.duration_s < 10:
        return True, f"limit wall_clock after {result.duration_s:.1f} s"
    return False, f"limit {result.limit} after {result.duration_s:.1f} s"


async def _cpu_time(ctx: _Context, sandbox: Sandbox) -> tuple[bool, str]:
    result = await sandbox.exec(["sh", "-c", "while :; do :; done"], timeout=30)
    if result.limit == "cpu_time":
        return True, f"limit cpu_time after {result.duration_s:.1f} s"
    return False, f"limit {result.limit} after {result.duration_s:.1f} s"


CANARIES: tuple[_Spec, ...] = (
    _Spec("secret-file", "secret file outside", lambda c: c.isolation, _secret_file),
    _Spec("write-outside", "write outside", lambda c: c.isolation, _write_outside),
    _Spec(
        "network",
        "network",
        lambda c: bool({"none", "model-only"} & c.network),
        _network,
    ),
    _Spec("env-processes", "host env, processes", lambda c: c.isolation, _env_and_processes),
    _Spec("orphans", "setsid, double fork", lambda c: c.isolation, _orphans),
    _Spec(
        "fork-bomb",
        "fork bomb",
        lambda c: "processes" in c.limits,
        _fork_bomb,
        {"processes": 64},
        dangerous=True,
    ),
    _Spec(
        "memory-hog",
        "memory hog",
        lambda c: "memory" in c.limits,
        _memory_hog,
        {"memory_bytes": 128 << 20},
        dangerous=True,
    ),
    _Spec("output-cap", "output cap", lambda c: "output" in c.limits, _output_cap),
    _Spec("time-cap", "wall clock", lambda c: "wall_clock" in c.limits, _time_cap),
    _Spec(
        "cpu-time",
        "CPU time",
        lambda c: "cpu_time" in c.limits,
        _cpu_time,
        {"cpu_seconds": 1},
        dangerous=True,
    ),
)


async def check_provider(
    provider: SandboxProvider, only: Sequence[str] | None = None
) -> ProviderReport:
    """Run every canary (or those named in `only`) against `provider`."""
    report = ProviderReport(provider.name, unavailable=provider.unavailable())
    if report.unavailable is None:
        probe = _Context(provider, provider.capabilities(), Path(), 0, 0)
        try:  # what the canaries' policy needs beyond the provider (docker: an image) is here
            provider.check(probe.policy(network=probe.sandbox_network()))
        except SandboxError as exc:
            report.unavailable = str(exc)
    if report.unavailable is not None:
        return report
    caps = provider.capabilities()
    unknown = set(only or ()) - {spec.name for spec in CANARIES}
    if unknown:
        raise ValueError(f"no canary {', '.join(sorted(unknown))}")
    with _server() as allowed, _server() as forbidden:
        for spec in CANARIES:
            if only is None or spec.name in only:
                report.results.append(await _run(spec, provider, caps, allowed, forbidden))
    return report


async def _run(
    spec: _Spec, provider: SandboxProvider, caps: Capabilities, allowed: int, forbidden: int
) -> CanaryResult:
    claimed = spec.claimed(caps)
    if not claimed and spec.dangerous:
        return CanaryResult(spec.name, "not claimed", "not run")
    with tempfile.TemporaryDirectory(prefix="trialkit-canary-ws-") as folder:
        workspace = Path(folder)
        ctx = _Context(provider, caps, workspace, allowed, forbidden)
        limits = spec.limits if claimed else {}
        policy = ctx.policy(network=ctx.sandbox_network(), **limits)
        try:
            async with provider.sandbox(
                workspace, policy, [f"http://127.0.0.1:{allowed}/v1"]
            ) as sandbox:
                held, detail = await spec.run(ctx, sandbox)
        except (SandboxError, OSError) as exc:
            return CanaryResult(spec.name, "error", str(exc))
    if not claimed:
        return CanaryResult(spec.name, "not claimed", detail)
    return CanaryResult(spec.name, "held" if held else "broken", detail)


@contextlib.contextmanager
def _server() -> Iterator[int]:
    class Quiet(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _processes_with(needle: str) -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as file:
            if needle.encode() in file.read():
                yield int(entry)


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


_MARK = {"held": "held", "broken": "BROKEN", "not claimed": "not claimed", "error": "ERROR"}


def markdown_table(reports: list[ProviderReport]) -> str:
    """Provider × canary, as Markdown."""
    header = "| canary | " + " | ".join(r.provider for r in reports) + " |"
    lines = [header, "|---" * (len(reports) + 1) + "|"]
    for spec in CANARIES:
        cells = []
        for report in reports:
            if report.unavailable is not None:
                cells.append("unavailable")
                continue
            result = next((r for r in report.results if r.name == spec.name), None)
            cells.append("not run" if result is None else _MARK[result.status])
        lines.append(f"| {spec.title} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
