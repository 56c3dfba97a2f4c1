"""The `local` provider: no isolation. Processes run as processes of this machine, as the user
running trialkit, with its files, its network and (unless `clear_env=True`) its environment:
what trialkit did before it had sandboxes, named for what it is. Only the wall clock and the
output cap of `exec` are enforced, and each process's session is stopped when it ends (a child
that calls `setsid` escapes that)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import anyio

from trialkit.sandbox import _process
from trialkit.sandbox.base import (
    Capabilities,
    NetworkPolicy,
    Sandbox,
    SandboxError,
    SandboxInfo,
    SandboxPolicy,
    SandboxProcess,
    SandboxProvider,
)

__all__ = ["LocalProvider", "LocalSandbox"]


class LocalSandbox(Sandbox):
    provider = "local"

    def __init__(self, workspace: Path, policy: SandboxPolicy, *, clear_env: bool) -> None:
        super().__init__(PurePosixPath(workspace), policy)
        self.root = workspace
        self.clear_env = clear_env

    @property
    def info(self) -> SandboxInfo:
        return SandboxInfo(
            provider="local",
            isolated=False,
            network="host",
            grader_network="host",
            limits=_recorded(self.policy),
        )

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        stdin: bool = False,
    ) -> SandboxProcess:
        if user is not None:
            raise SandboxError("sandbox 'local' cannot run processes as another user")
        base = {} if self.clear_env else dict(os.environ)
        merged = {**base, **self.policy.env, **(env or {})}
        if self.clear_env and "PATH" not in merged:
            merged["PATH"] = os.defpath
        process = await _process.start(argv, cwd=cwd or str(self.root), env=merged, stdin=stdin)
        return _process.HostProcess(process)

    async def read_file(self, path: str) -> bytes:
        return await anyio.Path(self._host(path)).read_bytes()

    async def write_file(self, path: str, data: bytes | str) -> None:
        target = anyio.Path(self._host(path))
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(data.encode() if isinstance(data, str) else data)

    async def copy_in(self, source: Path, target: str) -> None:
        await anyio.to_thread.run_sync(
            lambda: shutil.copytree(source, self._host(target), symlinks=True, dirs_exist_ok=True)
        )

    async def copy_out(self, source: str, target: Path) -> None:
        await anyio.to_thread.run_sync(
            lambda: shutil.copytree(self._host(source), target, symlinks=True, dirs_exist_ok=True)
        )

    def _host(self, path: str) -> Path:
        return self.root / path if not os.path.isabs(path) else Path(path)


def _recorded(policy: SandboxPolicy) -> dict[str, float | int]:
    limits = policy.limits
    return {
        name: value
        for name, value in (
            ("wall_clock_seconds", limits.wall_clock_seconds),
            ("output_bytes", limits.output_bytes),
        )
        if value is not None
    }


class LocalProvider(SandboxProvider):
    """No isolation (see the module's docstring). Option: `clear_env` (default `False`)."""

    name = "local"

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - {"clear_env"})
        if unknown:
            raise SandboxError(
                f"sandbox 'local': no option {', '.join(unknown)} (its one: clear_env)"
            )
        if not isinstance(options.get("clear_env", False), bool):
            raise SandboxError(
                f"sandbox 'local': clear_env: true or false, got {options['clear_env']!r}"
            )
        super().__init__(**options)

    def capabilities(self) -> Capabilities:
        return Capabilities(
            isolation=False,
            network=frozenset({"host"}),
            limits=frozenset({"wall_clock", "output"}),
            notes=(
                "no isolation: the host's files, network, environment and processes",
                "wall clock and output caps enforced by trialkit around each process",
            ),
        )

    def default_policy(self) -> SandboxPolicy:
        host = NetworkPolicy("host")
        return SandboxPolicy(provider="local", network=host, grader_network=host)

    def sandbox(
        self, workspace: Path, policy: SandboxPolicy, endpoints: Sequence[str] = ()
    ) -> AbstractAsyncContextManager[Sandbox]:
        return self._sandbox(workspace, policy)

    @asynccontextmanager
    async def _sandbox(self, workspace: Path, policy: SandboxPolicy) -> AsyncIterator[Sandbox]:
        yield LocalSandbox(workspace, policy, clear_env=bool(self.options.get("clear_env")))
