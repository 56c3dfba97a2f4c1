"""A sandbox process that is a process of this machine (the `local` and `bwrap` providers): a
session of its own, so that stopping it stops its whole process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence

import anyio
import anyio.abc
import anyio.to_thread

from trialkit.sandbox.base import LimitName, SandboxError, SandboxProcess


class HostProcess(SandboxProcess):
    def __init__(
        self,
        process: anyio.abc.Process,
        *,
        on_exit: Callable[[int], LimitName | None] | None = None,
        on_kill: Callable[[], None] | None = None,
    ) -> None:
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.stderr = process.stderr
        self._on_exit = on_exit
        self._on_kill = on_kill
        self._limit: LimitName | None = None
        self._judged = False

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int:
        code = await self.process.wait()
        if not self._judged:
            self._judged = True
            if self._on_exit is not None:  # it may read files (a disk limit): not on the loop
                self._limit = await anyio.to_thread.run_sync(self._on_exit, code)
        return code

    async def kill(self) -> None:
        if self._on_kill is not None:
            self._on_kill()
        if self.process.returncode is None:
            # never Popen's own kill: it polls first and would reap the child from under the
            # event loop's watcher (whose wait then reports 255)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def limit(self) -> LimitName | None:
        return self._limit

    async def aclose(self) -> None:
        await super().aclose()
        await self.process.aclose()


async def start(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    stdin: bool,
    pass_fds: Sequence[int] = (),
) -> anyio.abc.Process:
    """Start `argv` in a new session with pipes; `SandboxError` when it cannot start."""
    try:
        return await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise SandboxError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
