"""What the OpenAI and Anthropic providers share: error classification, argument parsing."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from trialkit.models.base import ErrorKind

PLACEHOLDER_API_KEY = "trialkit-no-key"
"""Sent to a custom `base_url` when no key is configured: local servers need none."""

Classification = tuple[ErrorKind, float | None, int | None]


class MalformedResponseError(Exception):
    """The provider answered, but not with a body we can read (a proxy's HTML page, cut-off
    JSON). Usually a hiccup on the way, so it is worth retrying."""


# --- the shape of a 200 answer -------------------------------------------------------------
#
# The SDKs do not validate what a server answers (a field left out is missing, a wrong type is
# kept as it came), so the providers check the parts they read against these shapes first: one
# rule for every malformed answer (a `MalformedResponseError`, retried like the others), whose
# message says where the body is wrong.

Leaf = tuple[type, ...]
"""The JSON types a value may have (`type(None)` for null)."""


@dataclass(frozen=True)
class Obj:
    """A JSON object; only the listed fields are checked (a missing one counts as null)."""

    fields: Mapping[str, Shape] = field(default_factory=dict)
    nullable: bool = False


@dataclass(frozen=True)
class ListOf:
    """A JSON array of `item`s; `non_empty` for one that must hold at least one."""

    item: Shape
    nullable: bool = False
    non_empty: bool = False


Shape = Leaf | Obj | ListOf
NULL: type = type(None)
TEXT: Leaf = (str, NULL)
COUNT: Leaf = (int, NULL)


def json_kind(value: object) -> str:
    """`null`, `true`, `a string`, `a number`, `a list`, `an object`, as JSON names them."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _kinds(leaf: Leaf) -> str:
    names = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
    names |= {dict: "an object", list: "a list", NULL: "null"}
    return " or ".join(names.get(kind, kind.__name__) for kind in leaf)


def shape_problem(value: object, shape: Shape, where: str = "") -> str | None:
    """The first place where `value` (parsed JSON) does not have `shape`, or `None`."""
    shown = where or "the body"
    if isinstance(shape, tuple):
        ok = isinstance(value, shape) and not (isinstance(value, bool) and bool not in shape)
        return None if ok else f"{shown} is {json_kind(value)}, expected {_kinds(shape)}"
    if value is None and shape.nullable:
        return None
    if isinstance(shape, Obj):
        if not isinstance(value, dict):
            return f"{shown} is {json_kind(value)}, expected an object"
        for name, inner in shape.fields.items():
            place = f"{where}.{name}" if where else name
            if name not in value and isinstance(inner, Obj | ListOf) and not inner.nullable:
                return f"{place} is missing"
            problem = shape_problem(value.get(name), inner, place)
            if problem is not None:
                return problem
        return None
    if not isinstance(value, list) or (shape.non_empty and not value):
        expected = "a non-empty list" if shape.non_empty else "a list"
        return f"{shown} is {json_kind(value)}, expected {expected}"
    for index, item in enumerate(value):
        problem = shape_problem(item, shape.item, f"{where}[{index}]")
        if problem is not None:
            return problem
    return None


def malformed(model_id: str, api: str, problem: str) -> MalformedResponseError:
    """The one error for a 200 answer that is not what the API documents."""
    return MalformedResponseError(
        f"{model_id}: the server answered with a body that is not {api}: {problem}. "
        "Retried as a passing hiccup; if it keeps happening, check that the base URL points "
        "at a server speaking this API (a proxy or gateway may be rewriting the answers)"
    )


def raw_body(answer: object) -> object:
    """What the SDK parsed from the body, as plain JSON values (it kept them unvalidated)."""
    dump: Callable[..., Any] | None = getattr(answer, "model_dump", None)
    if dump is None:
        return answer
    try:
        return dump(mode="python", warnings=False, exclude_unset=True)
    except Exception:  # a body so odd it cannot even be dumped
        return None


_CONVERSION_ERRORS = (AttributeError, TypeError, ValueError, KeyError, IndexError)


@contextmanager
def reading_answer(model_id: str, api: str) -> Iterator[None]:
    """Whatever the shapes did not foresee, while reading an answer, is malformed too."""
    try:
        yield
    except MalformedResponseError:
        raise
    except _CONVERSION_ERRORS as exc:
        problem = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise malformed(model_id, api, f"it could not be read ({problem})") from exc


def missing_sdk(model_id: str, sdk: str, extra: str) -> ImportError:
    return ImportError(
        f"{model_id}: the {sdk} SDK is not installed; pip install 'trialkit[{extra}]'"
    )


def parse_arguments(text: str | None) -> dict[str, Any]:
    """Tool-call arguments from the model's JSON string; `{"_raw": text}` when it is not a
    JSON object (models do produce broken JSON, and a transcript must keep what they said)."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}


def classify_status(status: int, headers: Mapping[str, str]) -> Classification:
    """An HTTP error status: 408, 409, 429 and 5xx are worth retrying, other 4xx are not."""
    if status in (408, 409, 429) or status >= 500:
        return ErrorKind.TRANSIENT, retry_after_seconds(headers), status
    return ErrorKind.PERMANENT, None, status


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """How long the server asked us to wait: `retry-after-ms`, or `retry-after` in seconds or
    as an HTTP date. `None` when it did not say (or said something unreadable)."""
    milliseconds = _number(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None
