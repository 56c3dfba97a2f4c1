"""One trial's sandbox, shared by the agent's turns and the graders (`ctx.sandbox`).

`TrialSandbox` is a `Sandbox` over the provider's own: it is started at its first use (an
`exec`, a file call, or `open(endpoints)` by a command-line agent, which brings the model
proxy's URLs) around the trial's workspace, started once, and stopped when the trial ends
(`close`). It follows the trial's phase (`set_phase("grader")` before the graders run: the
policy's `grader_network` from then on) and keeps every limit a command of it hit, with the
phase it was hit in, even when the caller swallowed the `ExecResult` or the `LimitExceeded`:
the trial then ends as an error naming the limit (`hit`), never a pass or a fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path, PurePosixPath

import anyio

from trialkit.sandbox.base import (
    ExecResult,
    LimitExceeded,
    LimitName,
    Phase,
    Sandbox,
    SandboxError,
    SandboxInfo,
    SandboxPolicy,
    SandboxProcess,
    SandboxProvider,
)

__all__ = ["TrialSandbox", "choose_sandbox", "limit_message", "policy_info"]

_REACHING = frozenset({"model-only", "allowlist"})


class TrialSandbox(Sandbox):
    """The trial's sandbox (see the module's docstring)."""

    def __init__(self, provider: SandboxProvider, policy: SandboxPolicy, workspace: Path) -> None:
        super().__init__(PurePosixPath(workspace), policy)
        self.provider_object = provider
        self.provider = provider.name  # type: ignore[misc]  # the instance's own name
        self.host_workspace = workspace
        self.inner: Sandbox | None = None
        self.used = False
        """Whether it was started (something ran in it, or a file went through it)."""
        self.hits: list[tuple[Phase, LimitName]] = []
        """Every limit a command hit, with the phase it was hit in, in order."""
        self._stack = AsyncExitStack()
        self._lock = anyio.Lock()
        self._endpoints: list[str] = []
        self._processes: list[tuple[Phase, SandboxProcess]] = []

    @property
    def opened(self) -> bool:
        return self.inner is not None

    @property
    def info(self) -> SandboxInfo:
        if self.inner is not None:
            return self.inner.info
        return policy_info(self.provider_object, self.policy)

    async def open(self, endpoints: Sequence[str] = ()) -> Sandbox:
        """The provider's sandbox, started at the first call; `endpoints` (the model proxy's
        URLs, an MCP server's) are reachable from then on under `model-only`."""
        async with self._lock:
            new = [url for url in endpoints if url not in self._endpoints]
            self._endpoints += new
            if self.inner is None:
                sandbox = await self._stack.enter_async_context(
                    self.provider_object.sandbox(
                        self.host_workspace, self.policy, list(self._endpoints)
                    )
                )
                self.workspace = sandbox.workspace
                if self.phase != "agent":
                    await sandbox.set_phase(self.phase)
                self.inner = sandbox
                self.used = True
            elif new and self._reaches():
                await self.inner.allow(new)
            return self.inner

    async def close(self) -> None:
        """Stop the sandbox and everything it started (the end of the trial)."""
        if not self.used:
            return  # never started: nothing to stop
        with anyio.CancelScope(shield=True):
            self._note_processes()
            await self._stack.aclose()
            self.inner = None

    async def set_phase(self, phase: Phase) -> None:
        self._note_processes()
        self.phase = phase
        if self.inner is not None:
            await self.inner.set_phase(phase)

    async def allow(self, endpoints: Sequence[str]) -> None:
        await self.open(endpoints)

    def hit(self, phase: Phase) -> LimitExceeded | None:
        """The first limit hit in `phase`, as the error the trial records, or `None`."""
        self._note_processes()
        for when, limit in self.hits:
            if when == phase:
                return LimitExceeded(limit, limit_message(limit, self.provider, phase))
        return None

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        stdin: bool = False,
    ) -> SandboxProcess:
        inner = await self.open()
        process = await inner.open_process(argv, cwd=cwd, env=env, user=user, stdin=stdin)
        self._processes.append((self.phase, process))
        return process

    async def exec(
        self,
        argv: Sequence[str],
        *,
        input: bytes | str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the interface's name
        output_bytes: int | None = None,
    ) -> ExecResult:
        inner = await self.open()
        phase = self.phase
        result = await inner.exec(
            argv,
            input=input,
            cwd=cwd,
            env=env,
            user=user,
            timeout=timeout,
            output_bytes=output_bytes,
        )
        own = (result.limit == "wall_clock" and timeout is not None) or (
            result.limit == "output" and output_bytes is not None
        )
        if result.limit is not None and not own:  # a timeout or cap the caller chose is its own
            self.hits.append((phase, result.limit))
        return result

    async def read_file(self, path: str) -> bytes:
        return await (await self.open()).read_file(path)

    async def write_file(self, path: str, data: bytes | str) -> None:
        await (await self.open()).write_file(path, data)

    async def copy_in(self, source: Path, target: str) -> None:
        await (await self.open()).copy_in(source, target)

    async def copy_out(self, source: str, target: Path) -> None:
        await (await self.open()).copy_out(source, target)

    def _reaches(self) -> bool:
        return bool({self.policy.network.mode, self.policy.grader_network.mode} & _REACHING)

    def _note_processes(self) -> None:
        """The limits that ended the processes started so far (those that ended)."""
        running: list[tuple[Phase, SandboxProcess]] = []
        for phase, process in self._processes:
            if process.returncode is None:
                running.append((phase, process))
                continue
            limit = process.limit()
            if limit is not None:
                self.hits.append((phase, limit))
        self._processes = running


def choose_sandbox(spec: SandboxPolicy | str) -> tuple[SandboxProvider, SandboxPolicy]:
    """The provider `spec` names (made with the policy's `options`) and the policy (its
    default for a bare name); `ValueError` with one line when there is no such provider, it
    cannot run here, or it cannot enforce the policy."""
    from trialkit.sandbox.registry import load_provider

    if not isinstance(spec, SandboxPolicy | str):
        raise ValueError(f"a provider's name or a SandboxPolicy, got {type(spec).__name__}")
    name = spec if isinstance(spec, str) else spec.provider
    try:
        provider = load_provider(name, **({} if isinstance(spec, str) else dict(spec.options)))
        policy = provider.default_policy() if isinstance(spec, str) else spec
        provider.check(policy)
    except SandboxError as exc:
        raise ValueError(str(exc)) from None
    return provider, policy


def limit_message(limit: LimitName, provider: str, phase: Phase) -> str:
    """The trial's error for a limit hit in `phase`, naming the limit."""
    who = "the agent" if phase == "agent" else "a grader's command"
    return f"{who} hit the {provider} sandbox's {limit} limit; it was stopped"


def policy_info(provider: SandboxProvider, policy: SandboxPolicy) -> SandboxInfo:
    """What a trial records of a sandbox of `policy` that was never started."""
    limits = {
        key: value
        for key, value in vars(policy.limits).items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    isolated = provider.capabilities().isolation
    return SandboxInfo(
        provider=provider.name,
        isolated=isolated,
        network=policy.network.mode,
        grader_network=policy.grader_network.mode,
        limits=limits,
        image=policy.image,
    )
