"""Run async work from sync code, whether or not this thread already runs an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import anyio.from_thread

T = TypeVar("T")


def in_event_loop() -> bool:
    """Whether this thread is running an event loop (an async test, a Jupyter cell, or a
    library that drives a loop from sync code, as Playwright's sync API does: its loop runs
    while no task of it is current, which anyio's detection does not see)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return True
    try:
        anyio.current_time()  # asks the loop of this thread, through anyio's own detection
    except RuntimeError:  # anyio.NoEventLoopError (sniffio's error under anyio before 4.11)
        return False
    return True


def run_blocking(work: Callable[[], Awaitable[T]]) -> T:
    """Run `work` to its end and return what it returns.

    On this thread when it runs no event loop; otherwise on a loop of its own in a worker
    thread, waiting for it (a loop cannot be run inside another). An interruption (Ctrl-C)
    while waiting cancels the work, which then stores what finished, as it does on this thread.
    """
    if not in_event_loop():
        return anyio.run(work)
    with anyio.from_thread.start_blocking_portal(name="trialkit-run") as portal:
        return portal.call(work)
