"""Calling user code from the event loop: async code awaited, blocking code in a thread."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import anyio.to_thread


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
    result = await anyio.to_thread.run_sync(fn, arg)
    if inspect.isawaitable(result):
        result = await result
    return result
