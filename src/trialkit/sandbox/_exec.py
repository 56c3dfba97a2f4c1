"""`Sandbox.exec` over `Sandbox.open_process`: input fed, both outputs read with a cap, a wall
clock, and the process stopped (with all it started) at the first limit.

It knows a sandbox process by its type only: `Sandbox.exec` (in `base`) makes its
`ExecResult` of what `run_to_end` returns."""

from __future__ import annotations

import contextlib
import math
import time
from typing import TYPE_CHECKING, NamedTuple

import anyio
import anyio.abc

if TYPE_CHECKING:
    from trialkit.sandbox.base import LimitName, SandboxProcess


class Ended(NamedTuple):
    """How a process run by `run_to_end` ended: the fields of an `ExecResult`."""

    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    limit: LimitName | None
    duration_s: float


class _Capped:
    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    def take(self, chunk: bytes) -> bool:
        """Keep `chunk` up to the cap; whether the cap was passed."""
        if self.cap is None:
            self.data += chunk
            return False
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.data += chunk[: max(room, 0)]
            self.truncated = True
            return True
        self.data += chunk
        return False


async def run_to_end(
    process: SandboxProcess, data: bytes | None, cap: int | None, wall: float | None
) -> Ended:
    started = time.monotonic()
    out, err = _Capped(cap), _Capped(cap)
    stopped: list[LimitName] = []

    async def read(stream: anyio.abc.ByteReceiveStream | None, into: _Capped) -> None:
        if stream is None:
            return
        try:
            async for chunk in stream:
                if into.take(chunk):
                    if not stopped:
                        stopped.append("output")
                    await process.kill()
                    return
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return

    async def feed() -> None:
        if process.stdin is None:
            return
        try:
            if data:
                await process.stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await process.stdin.aclose()

    try:
        with anyio.move_on_after(wall if wall is not None else math.inf) as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(feed)
                group.start_soon(read, process.stdout, out)
                group.start_soon(read, process.stderr, err)
            returncode = await process.wait()
        if scope.cancelled_caught:
            stopped.append("wall_clock")
            with anyio.CancelScope(shield=True):
                await process.kill()
                returncode = await process.wait()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await process.kill()
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()
    # the sandbox's own account of a limit (memory, processes, ...) names the cause; a wall
    # clock or output cap is what stopped a process that hit it
    limit = process.limit() or (stopped[0] if stopped else None)
    return Ended(
        returncode=returncode,
        stdout=bytes(out.data),
        stderr=bytes(err.data),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        limit=limit,
        duration_s=time.monotonic() - started,
    )
