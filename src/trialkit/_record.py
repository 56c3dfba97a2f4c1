"""The base of every record trialkit writes to disk or to the store."""

from __future__ import annotations

import functools
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from trialkit.secrets import redact


class Record(BaseModel):
    """A pydantic model that rejects unknown fields, so a typo in a file is an error, and
    NaN or infinite numbers, which no report could aggregate honestly."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


_FIELD_SETS: dict[frozenset[str], set[str]] = {}
_HOLDERS = (BaseModel, list, tuple, dict)


def share_field_sets(record: BaseModel) -> None:
    """Let `record`, and the records inside it, share their set of explicitly set fields with
    every record that has the same one: pydantic gives each model instance a set of its own
    (1.2 KB for a task report's 29 names), which is most of what a long-lived record costs.
    For records a run keeps per task (plans, listed results, task reports), 10,000 of which
    held 30 MB of identical sets. What the set means is unchanged; adding a name to it (by
    assigning a field that was not set) adds it for the records that share it, which affects
    only a dump with `exclude_unset`, which trialkit does not make of these."""
    stack: list[object] = [record]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseModel):
            own = item.__pydantic_fields_set__
            key = frozenset(own)
            shared = _FIELD_SETS.get(key)
            fresh = shared is None
            if shared is None:  # `setdefault` is atomic: of two threads here, one set wins
                shared = _FIELD_SETS.setdefault(key, own)
            if shared is not own:
                object.__setattr__(item, "__pydantic_fields_set__", shared)
            elif not fresh:
                continue  # walked before: what it holds shares already
            values = item.__dict__
            stack.extend(values[name] for name in _holding_fields(type(item)) if name in values)
        elif isinstance(item, list | tuple):
            stack.extend(x for x in item if isinstance(x, _HOLDERS))
        elif isinstance(item, dict):
            stack.extend(x for x in item.values() if isinstance(x, _HOLDERS))


@functools.cache
def _holding_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of `cls` whose values may hold a record: a task report's 3 of 29."""
    return tuple(name for name, field in cls.model_fields.items() if _may_hold(field.annotation))


def _may_hold(annotation: Any) -> bool:
    if isinstance(annotation, type):
        return issubclass(annotation, BaseModel)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return False
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        args = args[:1]
    if not args:
        return annotation is not None  # Any, a TypeVar, an alias: it may
    return any(_may_hold(arg) for arg in args if arg is not Ellipsis)


def clean_text(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD, so it can always be encoded as UTF-8.

    Agent output decoded with `surrogateescape` (subprocesses) or produced by a broken model
    carries them, and no store, JSON or XML writer can write them.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class ErrorInfo(Record):
    """An exception turned into data: what a trial or a score carries instead of raising."""

    type: str
    """The exception's class name, e.g. `TimeoutError`."""
    message: str
    traceback: str | None = None
    phase: str | None = None
    """Where it happened: `setup`, `agent`, `capture`, `grading` or `teardown` (for a timeout,
    the phase that was running when time ran out)."""

    @field_validator("message", "traceback")
    @classmethod
    def _redacted(cls, text: str | None) -> str | None:
        """No secret in an error, however it was made (a provider may echo its API key)."""
        return None if text is None else redact(text)

    @classmethod
    def from_exception(cls, exc: BaseException, *, phase: str | None = None) -> ErrorInfo:
        import traceback

        from trialkit._errors import describe

        kind, message = describe(exc)  # an exception group's real error, not "unhandled errors"
        return cls(
            type=kind,
            message=clean_text(message),
            traceback=clean_text("".join(traceback.format_exception(exc))),
            phase=phase,
        )

    def summary(self) -> str:
        return f"{self.type}: {self.message}"


def nested_deeper_than(data: object, limit: int) -> bool:
    """Whether `data` (parsed JSON) nests lists and objects more than `limit` deep; iterative,
    so a file too deep for recursion is measured, not a `RecursionError`."""
    stack: list[tuple[object, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= limit:
                return True
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
    return False
