"""The sandbox of a run's trials: which one, made ready once per process, one per trial.

The sandbox a run names is the command-line agent's (`SubprocessAgent.in_sandbox`, the suite
file's `sandbox:` key, `trialkit run --sandbox`), else the suite's own (`Suite(sandbox=...)`,
in which a command-line agent without a sandbox of its own then runs its turns);
each trial gets a `TrialSandbox` of it around its workspace (a folder of its own when it has
none), shared by the agent's turns and the graders (`ctx.sandbox`) and stopped when the trial
ends. When the run names none, a trial with a workspace folder gets the `local` provider's
sandbox over it (no isolation, as its name says), and a trial without one gets none.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import anyio

from trialkit.sandbox.base import SandboxPolicy, SandboxProvider
from trialkit.sandbox.trial import TrialSandbox

__all__ = ["RunSandbox", "sandbox_named"]


def sandbox_named(suite: Any, provider: str) -> None:
    """Run `suite`'s trials in `provider`'s sandbox with its default policy (`--sandbox`):
    its command-line agent's turns (`in_sandbox`), else the suite's own (`ctx.sandbox`).
    `suite.sandbox` then holds the name, so worker processes that load the suite again do
    the same. `SandboxError` or `ValueError`, one line, when it cannot be had."""
    from trialkit.harness.subprocess import SubprocessAgent
    from trialkit.sandbox.trial import choose_sandbox

    if isinstance(suite.harness, SubprocessAgent):
        suite.harness.in_sandbox(provider)
    else:
        suite.chosen_sandbox = choose_sandbox(provider)
    suite.sandbox = provider


class RunSandbox:
    """Chooses the run's sandbox and makes each trial's (see the module's docstring)."""

    def __init__(self, harness: Any, suite: Any) -> None:
        self.harness = harness
        self.named: tuple[SandboxProvider, SandboxPolicy] | None = None
        self.owned = False
        """Whether this sets the provider up and tears it down (else the harness does)."""
        from trialkit.harness.subprocess import SubprocessAgent

        chosen = getattr(suite, "chosen_sandbox", None)
        if isinstance(harness, SubprocessAgent) and harness.sandbox_provider is None and chosen:
            # a command-line agent without a sandbox of its own runs its turns in the suite's
            harness.in_sandbox(chosen[1], **dict(chosen[1].options))
        provider = getattr(harness, "sandbox_provider", None)
        policy = getattr(harness, "sandbox_policy", None)
        if isinstance(provider, SandboxProvider) and isinstance(policy, SandboxPolicy):
            self.named = (provider, policy)
        elif chosen is not None:
            self.named, self.owned = chosen, True
        self._ready_pid = 0
        self._lock = anyio.Lock()
        self._local: tuple[SandboxProvider, SandboxPolicy] | None = None

    async def for_trial(self, world: Any) -> tuple[TrialSandbox | None, Path | None]:
        """The trial's sandbox (not started yet) and the folder made for it, if one was."""
        path = getattr(world, "path", world)
        folder = Path(path) if isinstance(path, str | os.PathLike) else None
        if self.named is None:
            if folder is None or not folder.is_dir():
                return None, None
            if self._local is None:
                from trialkit.sandbox.local import LocalProvider

                local = LocalProvider()
                self._local = (local, local.default_policy())
            return TrialSandbox(*self._local, folder), None
        await self._ready()
        made = None
        if folder is None:
            cwd = getattr(self.harness, "cwd", None)
            if isinstance(cwd, Path):
                folder = cwd
            else:
                folder = made = Path(tempfile.mkdtemp(prefix="trialkit-sandbox-"))
        provider, policy = self.named
        return TrialSandbox(provider, policy, folder), made

    async def close_trial(self, sandbox: TrialSandbox | None, made: Path | None) -> None:
        if sandbox is not None:
            await sandbox.close()
        if made is not None:
            await anyio.to_thread.run_sync(shutil.rmtree, made, True)

    async def _ready(self) -> None:
        """The provider's work done once per suite (an image build), in this process."""
        async with self._lock:
            if self._ready_pid == os.getpid() or self.named is None:
                return
            ready = getattr(self.harness, "_sandbox_ready", None)
            if not self.owned and ready is not None:
                await ready()  # the agent's, which its `aclose` undoes
            else:
                await self.named[0].setup(self.named[1])
            self._ready_pid = os.getpid()

    async def aclose(self) -> None:
        """Undo the provider's setup, when this did it (after the run's last trial)."""
        if self.owned and self.named is not None and self._ready_pid == os.getpid():
            self._ready_pid = 0
            with anyio.CancelScope(shield=True):
                await self.named[0].teardown()
