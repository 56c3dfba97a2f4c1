"""Calling user code from the event loop: async code awaited, blocking code in a thread.

Blocking user code (a sync agent, tool, probe or grader) runs in a daemon thread of its own
(`run_blocking`): when its trial is cancelled (a timeout, Ctrl-C) the call is abandoned at
once, the thread finishes on its own, and it never keeps the process alive after the run.
Python cannot stop a thread; it can decline to wait for one. anyio's worker threads are not
daemons, so an abandoned one held `trialkit run` open until the blocking call returned.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

T = TypeVar("T")


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling `fn` gives a coroutine: an async function, a partial of one, or an
    object with an async `__call__`."""
    if isinstance(fn, functools.partial):
        return is_async(fn.func)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with an async __call__
    )


async def call_user(fn: Callable[[Any], Any], arg: Any) -> Any:
    """Call user code: awaited if async, in a worker thread if sync (it may block)."""
    if is_async(fn):
        return await fn(arg)
    result = await run_blocking(fn, arg)
    if inspect.isawaitable(result):
        result = await result
    return result


async def run_blocking(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a daemon thread, awaited; abandoned, not waited for, when cancelled.

    The thread sees the caller's context variables (the trial's transcript recorder) and, as
    in anyio's worker threads, may call back into the event loop with `anyio.from_thread.run`.
    The threads of one run are bounded by anyio's default thread limiter, like its own.
    """
    token = anyio.lowlevel.current_token()
    context = contextvars.copy_context()
    done = anyio.Event()
    outcome: list[tuple[bool, Any]] = []

    def work() -> None:
        _claim_loop(token)
        try:
            outcome.append((True, context.run(fn, *args)))
        except BaseException as exc:  # handed to the caller, raised there
            outcome.append((False, exc))
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            anyio.from_thread.run_sync(done.set, token=token)

    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    async with anyio.to_thread.current_default_thread_limiter():
        threading.Thread(target=work, name=f"trialkit: {name}", daemon=True).start()
        await done.wait()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _claim_loop(token: anyio.lowlevel.EventLoopToken) -> None:
    """Let `anyio.from_thread.run(...)` without a token reach the loop from this thread, as
    it does from anyio's worker threads (the same private slot anyio fills for them)."""
    try:
        from anyio._core._eventloop import threadlocals
    except ImportError:  # pragma: no cover - a later anyio: calls need their token then
        return
    threadlocals.current_token = token
