"""How many sandboxes of one provider start at once: a burst of trials (a run's concurrency, a
retry storm) starts them a few at a time, so that the machine keeps CPU for the processes
already running, and the first trials get theirs sooner.

The bound is per provider object (a run's trials share one): its `starts` option, else
`$TRIALKIT_SANDBOX_STARTS`, else the machine's CPU count. A start is what a provider does
before the command runs (bwrap: its namespaces, mounts, cgroup and bridge, per command;
docker: the container, per trial); the commands themselves run side by side, as many as the
run's concurrency lets.

How many are alive at once (from the start of a trial's sandbox to its end) is bounded apart:
the `alive` option, else `$TRIALKIT_SANDBOX_ALIVE`, else the provider's default (bwrap: none, a
trial's sandbox is a folder until a command runs; docker and podman: 4 per CPU). A trial past
the bound waits for another's sandbox to end; it never fails for it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

from trialkit.sandbox.base import SandboxError

__all__ = ["ALIVE_ENV", "STARTS_ENV", "AliveGate", "StartGate", "alive_bound", "start_bound"]

STARTS_ENV = "TRIALKIT_SANDBOX_STARTS"
"""Sandboxes of one provider starting at once, when its `starts` option says nothing."""


ALIVE_ENV = "TRIALKIT_SANDBOX_ALIVE"
"""Sandboxes of one provider alive at once, when its `alive` option says nothing."""


def start_bound(provider: str, option: Any = None) -> int:
    """The bound for `provider`: `option` (its `starts`), `$TRIALKIT_SANDBOX_STARTS`, or the
    CPU count; `SandboxError` (one line naming where it came from) for a bad value."""
    where, value = f"sandbox {provider!r}: option starts", option
    if value is None:
        where, value = STARTS_ENV, os.environ.get(STARTS_ENV) or None
    if value is None:
        return max(1, os.cpu_count() or 1)
    return _whole(where, value)


def alive_bound(provider: str, option: Any = None, per_cpu: int | None = None) -> int | None:
    """How many sandboxes of `provider` may be alive at once (from the start of a trial's
    sandbox to its end): `option` (its `alive`), `$TRIALKIT_SANDBOX_ALIVE`, else `per_cpu`
    times the CPU count (`None`: no bound); `SandboxError` (one line) for a bad value."""
    where, value = f"sandbox {provider!r}: option alive", option
    if value is None:
        where, value = ALIVE_ENV, os.environ.get(ALIVE_ENV) or None
    if value is None:
        return None if per_cpu is None else per_cpu * max(1, os.cpu_count() or 1)
    return _whole(where, value)


def _whole(where: str, value: Any) -> int:
    try:
        bound = int(value) if not isinstance(value, bool | float) else 0
    except (TypeError, ValueError):
        bound = 0
    if bound < 1:
        raise SandboxError(f"{where}: a whole number of sandboxes >= 1, got {value!r}")
    return bound


class StartGate:
    """At most `bound` starts at once (a semaphore per event loop: a provider object may be
    used by several threads' loops)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._semaphores: dict[object, anyio.Semaphore] = {}

    @asynccontextmanager
    async def start(self) -> AsyncIterator[None]:
        token = anyio.lowlevel.current_token()
        semaphore = self._semaphores.get(token)
        if semaphore is None:
            semaphore = self._semaphores.setdefault(token, anyio.Semaphore(self.bound))
        async with semaphore:
            yield


class AliveGate(StartGate):
    """At most `bound` sandboxes alive at once (`None`: no bound); a trial past the bound
    waits for one to end, it does not fail."""

    def __init__(self, bound: int | None) -> None:
        super().__init__(bound or 1)
        self.limit = bound

    @asynccontextmanager
    async def alive(self) -> AsyncIterator[None]:
        if self.limit is None:
            yield
            return
        async with self.start():
            yield
