"""A command-line agent's turns in a sandbox (`SubprocessAgent.in_sandbox`): the trial's sandbox
(the runner's `ctx.sandbox`, shared with the graders and stopped at the trial's end; else one
of its own, outside a runner) opened at its first turn around the workspace, with the model
proxy's URLs as its endpoints (and each turn's MCP server added), and each turn's command run
in it with the same caps as
outside (`_process`: stdout kept up to `MAX_STDOUT_BYTES` and handed over line by line,
stderr's last `MAX_STDERR_BYTES`). A limit of the sandbox that ended the command raises
`LimitExceeded`, so the trial is an error naming the limit."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import anyio.abc

from trialkit.harness._process import MAX_STDERR_BYTES, MAX_STDOUT_BYTES, Finished, Stdout
from trialkit.sandbox.base import (
    LimitExceeded,
    LimitName,
    Sandbox,
    SandboxPolicy,
    SandboxProvider,
)
from trialkit.sandbox.trial import TrialSandbox, limit_message

MCP_CONFIG = "/tmp/trialkit-mcp.json"
"""Where `{mcp_config}` is written inside the sandbox (its private /tmp)."""


class SandboxedTurns:
    def __init__(
        self,
        provider: SandboxProvider,
        policy: SandboxPolicy,
        workspace: Path,
        shared: object = None,
    ) -> None:
        self.provider = provider
        self.policy = policy
        self.workspace = workspace
        self.stack = AsyncExitStack()
        self.sandbox: Sandbox | None = None
        self.home = ""
        self.shared = (
            shared
            if isinstance(shared, TrialSandbox) and shared.provider_object is provider
            else None
        )
        """The trial's sandbox of the runner, when it is this agent's: used, never closed
        (around the trial's workspace, or the folder the runner made when it has none)."""

    async def open(self, endpoints: Sequence[str]) -> Sandbox:
        """The trial's sandbox, started at the first call."""
        if self.shared is not None:
            await self.shared.open(endpoints)
            if self.sandbox is None:
                self.sandbox = self.shared
                self.home = await _home(self.shared)
            return self.shared
        if self.sandbox is None:
            self.sandbox = await self.stack.enter_async_context(
                self.provider.sandbox(self.workspace, self.policy, list(endpoints))
            )
            self.home = await _home(self.sandbox)
        return self.sandbox

    async def close(self) -> None:
        await self.stack.aclose()
        self.sandbox = None

    async def run(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        stdin: bytes | None,
        time_limit: float | None,
        on_line: Callable[[str], None] | None,
    ) -> Finished:
        assert self.sandbox is not None
        wall = self.policy.limits.wall_clock_seconds
        limit = min(time_limit or math.inf, wall or math.inf)
        process = await self.sandbox.open_process(argv, cwd=cwd, env=env, stdin=stdin is not None)
        out = Stdout(MAX_STDOUT_BYTES, on_line)
        err = bytearray()

        async def feed() -> None:
            if process.stdin is None:
                return
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.send(stdin or b"")
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()

        async def read(stream: anyio.abc.ByteReceiveStream | None, stdout: bool) -> None:
            if stream is None:
                return
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                async for chunk in stream:
                    if stdout:
                        out.feed(chunk)
                    else:
                        err.extend(chunk)
                        del err[:-MAX_STDERR_BYTES]

        try:
            with anyio.move_on_after(limit) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(feed)
                    group.start_soon(read, process.stdout, True)
                    group.start_soon(read, process.stderr, False)
                returncode = await process.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await process.aclose()
        if scope.cancelled_caught:
            if wall is not None and limit == wall:
                if self.shared is not None:
                    self.shared.hits.append(("agent", "wall_clock"))
                raise LimitExceeded("wall_clock", _hit("wall_clock", self.policy))
            raise TimeoutError(
                f"the agent {argv[0]!r} did not finish the turn within {limit:g} s; it was stopped"
            )
        hit = process.limit()
        if hit is not None:
            raise LimitExceeded(hit, _hit(hit, self.policy))
        out.flush()
        stderr = err.decode("utf-8", "replace")
        return Finished(returncode, out.kept.decode("utf-8", "replace"), stderr, out.dropped)


def ran_loose(sandbox: object) -> None:
    """A command-line agent with no sandbox of its own runs as processes of this machine: the
    `local` provider's sandbox of the trial (no isolation) is what the trial records."""
    if isinstance(sandbox, TrialSandbox) and sandbox.provider == "local":
        sandbox.used = True


async def _home(sandbox: Sandbox) -> str:
    found = await sandbox.exec(["sh", "-c", 'printf %s "$HOME"'], timeout=30)
    return found.stdout_text if found.returncode == 0 else ""


def _hit(limit: LimitName, policy: SandboxPolicy) -> str:
    return limit_message(limit, policy.provider, "agent")
