"""Harnesses for plain Python code: functions and session classes."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from trialkit._calls import is_async, run_blocking
from trialkit._record import clean_text
from trialkit.harness._agent_output import AgentOutputError
from trialkit.harness.base import (
    Harness,
    HarnessError,
    HarnessLike,
    Reply,
    Session,
    TrialContext,
)
from trialkit.models.base import key_of
from trialkit.models.context import current_settings
from trialkit.transcript import Message, current_recorder


def to_reply(result: object, *, source: str) -> Reply:
    """Normalise what agent code returned: a string, a `Reply`, `None`, or JSON-able data."""
    if isinstance(result, Reply):
        if result.output is not None:
            result.output = clean_text(result.output)
        if result.error is not None:
            result.error = clean_text(result.error)
        return result
    if isinstance(result, str):
        return Reply(output=clean_text(result))
    if result is None:
        return Reply(output=None)
    if isinstance(result, dict | list | int | float | bool):
        return Reply(output=json.dumps(result, ensure_ascii=False))
    raise AgentOutputError(  # a broken harness, never the agent's expected failure
        f"{source} returned {type(result).__name__}; expected a string, a trialkit Reply, "
        "None, or JSON-serialisable data"
    )


def _wants_context(fn: Callable[..., Any]) -> bool:
    """Whether `fn` takes a second positional argument (the `TrialContext`)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


class FunctionHarness(Harness):
    """Any callable, sync or async, from the task input to an answer.

    The callable gets the turn's input (a string, or a list of `Message`s) and, if it takes a
    second argument, the `TrialContext`. For a task with several turns it is called once per
    turn. Blocking (sync) callables run in worker threads so the event loop never waits.
    """

    def __init__(
        self, fn: Callable[..., Any], *, name: str | None = None, model: str | None = None
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a harness must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.model = model
        """When set, the function's text answers go through the run's cassette under this id,
        keyed by the input, so a whole agent can be recorded and replayed like a model."""
        self.name = name or getattr(fn, "__qualname__", None) or type(fn).__name__
        self.is_async = is_async(fn)
        self.with_context = _wants_context(fn)

    async def session(self, ctx: TrialContext) -> Session:
        return _FunctionSession(self, ctx)


class _FunctionSession(Session):
    def __init__(self, harness: FunctionHarness, ctx: TrialContext) -> None:
        self.harness = harness
        self.ctx = ctx

    async def send(self, message: str | list[Message]) -> Reply:
        cassette = current_settings().cassette
        if self.harness.model is None or cassette is None:
            return await self._call(message)
        model_id = self.harness.model
        key_input: object = (
            message
            if isinstance(message, str)
            else [m.model_dump(mode="json", exclude_defaults=True) for m in message]
        )
        recorder = current_recorder()
        trial = recorder.trial_index if recorder else 0
        key = key_of({"model": model_id, "input": key_input})
        occurrence = recorder.next_occurrence(key) if recorder else 0
        if cassette.mode in ("replay", "auto"):
            output = cassette.lookup_text(model_id, key_input, trial=trial, occurrence=occurrence)
            if output is not None:
                return Reply(output=output)
            if cassette.mode == "replay":
                raise cassette.miss_text(
                    model_id,
                    key_input,
                    task_id=self.ctx.task.id,
                    trial=trial,
                    occurrence=occurrence,
                )
        reply = await self._call(message)
        if cassette.mode in ("record", "auto") and reply.output is not None and not reply.is_error:
            output = reply.output
            await anyio.to_thread.run_sync(
                lambda: cassette.record_text(
                    model_id, key_input, output, trial=trial, occurrence=occurrence
                )
            )
        return reply

    async def _call(self, message: str | list[Message]) -> Reply:
        h = self.harness
        args: tuple[Any, ...] = (message, self.ctx) if h.with_context else (message,)
        if h.is_async:
            result = await h.fn(*args)
        else:
            result = await run_blocking(h.fn, *args)
        return to_reply(result, source=f"harness {h.name!r}")


class SessionHarness(Harness):
    """A class (or factory) whose instances are agents with a `send(message)` method.

    One instance is made per trial, called with the `TrialContext` if its constructor takes an
    argument. `send` may be sync or async and returns what a harness function may return;
    an optional `close()` (sync or async) runs after the last turn.
    """

    def __init__(self, factory: Callable[..., Any], *, name: str | None = None) -> None:
        self.factory = factory
        self.name = name or getattr(factory, "__qualname__", None) or type(factory).__name__
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        self.with_context = len(params) >= 1

    async def session(self, ctx: TrialContext) -> Session:
        agent = self.factory(ctx) if self.with_context else self.factory()
        if inspect.isawaitable(agent):
            agent = await agent
        if not callable(getattr(agent, "send", None)):
            raise HarnessError(
                f"{self.name} made {type(agent).__name__}, which has no send() method"
            )
        return _ObjectSession(agent, self.name)


class _ObjectSession(Session):
    def __init__(self, agent: Any, name: str) -> None:
        self.agent = agent
        self.name = name
        self.send_is_async = is_async(agent.send)

    async def send(self, message: str | list[Message]) -> Reply:
        if self.send_is_async:
            result = await self.agent.send(message)
        else:
            result = await run_blocking(self.agent.send, message)
        return to_reply(result, source=f"{self.name}.send")

    async def close(self) -> None:
        close = getattr(self.agent, "close", None)
        if close is None:
            return
        result = close() if is_async(close) else await run_blocking(close)
        if inspect.isawaitable(result):
            await result


def recorded(fn: Callable[..., Any], *, model: str, name: str | None = None) -> FunctionHarness:
    """A function harness whose answers the run's cassette records and replays under `model`.

    ```python
    Suite(harness=recorded(my_agent, model="my-agent/v3"), ...)
    ```
    Only the text answer is kept; a turn that reports failure is not recorded.
    """
    return FunctionHarness(fn, name=name, model=model)


def as_harness(obj: HarnessLike) -> Harness:
    """A `Harness` for `obj`: a Harness, an agent class with `send`, or any callable."""
    if isinstance(obj, Harness):
        return obj
    from trialkit.models.base import Model

    if isinstance(obj, str | Model):
        from trialkit.harness.chat import ChatHarness

        return ChatHarness(obj)
    if isinstance(obj, type) and hasattr(obj, "send"):
        return SessionHarness(obj)
    if callable(obj):
        return FunctionHarness(obj)
    raise TypeError(f"not a harness: {obj!r} (expected a function, a Harness or an agent class)")
