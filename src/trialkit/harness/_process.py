"""Running an agent's command for one turn: a process group of its own, pipes read with caps,
a time limit, and nothing left running afterwards.

The command starts in a new session (so its process group can be stopped as a whole) and, on
Linux, with a parent-death signal (so it gets SIGTERM if trialkit dies). Stdout is kept up to
`MAX_STDOUT_BYTES` and handed over line by line as it arrives; stderr's last `MAX_STDERR_BYTES`
are kept. When the command exits, times out or is cancelled, its whole process group is stopped:
SIGTERM, `GRACE_S`, then SIGKILL. POSIX only.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO

import anyio
import anyio.to_thread

from trialkit.harness.base import HarnessError

__all__ = [
    "GRACE_S",
    "MAX_STDERR_BYTES",
    "MAX_STDOUT_BYTES",
    "AgentStartError",
    "Finished",
    "Stdout",
    "run_command",
]

MAX_STDOUT_BYTES = 10_000_000
"""Stdout kept per turn; the rest is read and dropped, and the transcript says so."""
MAX_STDERR_BYTES = 64_000
"""The tail of stderr kept per turn, for the error of a failed turn."""
GRACE_S = 2.0
"""Between SIGTERM and SIGKILL when stopping the agent's process group."""
_DRAIN_S = 1.0
"""How long to go on reading after the agent exited, for output still in the pipes."""
_POLL_S = 0.02


class AgentStartError(HarnessError):
    """The agent's command could not be started (not found, not executable)."""


@dataclass
class Finished:
    """How the command ended and what it printed."""

    returncode: int
    stdout: str
    stderr: str
    dropped: int
    """Bytes of stdout over `MAX_STDOUT_BYTES`, read and not kept."""


async def run_command(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: bytes | None,
    time_limit: float | None,
    on_line: Callable[[str], None] | None,
) -> Finished:
    """Run the command to its end; its process group is gone when this returns or raises."""
    process = _spawn(argv, cwd, env, with_stdin=stdin is not None)
    out = Stdout(MAX_STDOUT_BYTES, on_line)
    err = bytearray()

    def keep_tail(chunk: bytes) -> None:
        err.extend(chunk)
        del err[:-MAX_STDERR_BYTES]

    try:
        with anyio.move_on_after(math.inf if time_limit is None else time_limit) as deadline:
            async with anyio.create_task_group() as pipes:
                assert process.stdout is not None and process.stderr is not None
                pipes.start_soon(_pump, process.stdout, out.feed)
                pipes.start_soon(_pump, process.stderr, keep_tail)
                if stdin is not None:
                    assert process.stdin is not None
                    pipes.start_soon(_write, process.stdin, stdin)
                await _wait_exit(process)
                # What it left in the background may hold the pipes open: stop it, then give
                # the readers a moment for the output still buffered.
                await _stop_group(process)
                pipes.cancel_scope.deadline = anyio.current_time() + _DRAIN_S
    finally:
        with anyio.CancelScope(shield=True):
            await _stop_group(process)
            await _reap(process)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
    if deadline.cancelled_caught:
        raise TimeoutError(
            f"the agent {argv[0]!r} did not finish the turn within {time_limit:g} s; it was stopped"
        )
    out.flush()
    return Finished(
        returncode=-signal.SIGKILL if process.returncode is None else process.returncode,
        stdout=out.kept.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        dropped=out.dropped,
    )


_INSTALL = {
    "claude": "Claude Code: npm install -g @anthropic-ai/claude-code",
    "codex": "Codex: npm install -g @openai/codex",
}
"""How to install the command-line agents the presets run, for the error when one is missing."""


def _spawn(
    argv: list[str], cwd: Path, env: dict[str, str], *, with_stdin: bool
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group, so it can be stopped as a whole
            preexec_fn=_parent_death_signal(),
        )
    except OSError as exc:
        hint = ""
        if isinstance(exc, FileNotFoundError):
            known = _INSTALL.get(os.path.basename(argv[0]))
            hint = (
                f" (is it installed and on PATH? {known})"
                if known
                else (" (is it installed and on PATH?)")
            )
        elif exc.errno == errno.E2BIG:
            hint = " (the input is too long for an argument: use stdin=True)"
        raise AgentStartError(
            f"cannot start the agent command {argv[0]!r}: {exc.strerror or exc}{hint}"
        ) from exc


@cache
def _parent_death_signal() -> Callable[[], None] | None:
    """On Linux, what the child runs before exec so the kernel sends it SIGTERM when the
    thread that started it (the event loop's) ends, even if trialkit is killed outright."""
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        # Looked up here, in the parent: the forked child of a threaded process should do as
        # little as possible before exec.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def die_with_parent() -> None:  # pragma: no cover - runs in the child
        prctl(pr_set_pdeathsig, signal.SIGTERM)

    return die_with_parent


async def _pump(stream: IO[bytes], feed: Callable[[bytes], None]) -> None:
    fd = stream.fileno()
    os.set_blocking(fd, False)
    while True:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            return
        feed(chunk)


async def _write(stream: IO[bytes], data: bytes) -> None:
    fd = stream.fileno()
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            await anyio.wait_writable(fd)
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
    except BrokenPipeError:
        pass  # the agent does not read its input; that is its business
    finally:
        stream.close()


_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc")
"""Whether processes can be listed through /proc (to tell a live process from a zombie)."""


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the agent ended. With /proc it is not reaped yet: while it is a zombie its pid,
    the id of its process group, cannot go to another process that `killpg` would then hit."""
    if process.returncode is not None:
        return True
    if not _PROC:
        return process.poll() is not None
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


async def _wait_exit(process: subprocess.Popen[bytes]) -> None:
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: poll
        delay = 0.005
        while not _exited(process):
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.1)
        return
    try:
        while not _exited(process):
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the agent and every process left in its group: SIGTERM, `GRACE_S`, SIGKILL."""
    group = process.pid  # the leader of its own session, so the id of its group

    def running() -> bool:
        return not _exited(process) or _group_alive(group)

    if not running():
        return
    for sig, patience in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
        with anyio.move_on_after(patience):
            # Polled: the group's other processes are not our children, nothing signals their end.
            while running():  # noqa: ASYNC110
                await anyio.sleep(_POLL_S)
        if not running():
            return


async def _reap(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:  # only when even SIGKILL has not ended it yet
        with anyio.move_on_after(5.0):
            await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)


def _group_alive(group: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: an orphan's zombie
    waits for whatever reaps orphans here (PID 1 in some containers never does)."""
    if not _PROC:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(group).encode() and fields[0] != b"Z":
            return True
    return False


class Stdout:
    """Stdout as it arrives: kept up to `limit` bytes, and handed over line by line."""

    def __init__(self, limit: int, on_line: Callable[[str], None] | None) -> None:
        self.limit = limit
        self.on_line = on_line
        self.kept = bytearray()
        self.dropped = 0
        self._line = bytearray()
        self._too_long = False

    def feed(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.kept), 0)
        self.kept += chunk[:room]
        self.dropped += max(len(chunk) - room, 0)
        if self.on_line is None:
            return
        lines = chunk.split(b"\n")
        for part in lines[:-1]:
            self._add(part)
            if not self._too_long:
                self.on_line(self._line.decode("utf-8", "replace"))
            self._line.clear()
            self._too_long = False
        self._add(lines[-1])

    def _add(self, part: bytes) -> None:
        if len(self._line) + len(part) > self.limit:  # one line over the limit: dropped
            self._too_long = True
            self._line.clear()
        elif not self._too_long:
            self._line += part

    def flush(self) -> None:
        if self.on_line is not None and self._line and not self._too_long:
            self.on_line(self._line.decode("utf-8", "replace"))
        self._line.clear()
