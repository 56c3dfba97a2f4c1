"""What the OpenAI and Anthropic providers share: error classification, argument parsing."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from trialkit.models.base import ErrorKind

PLACEHOLDER_API_KEY = "trialkit-no-key"
"""Sent to a custom `base_url` when no key is configured: local servers need none."""

Classification = tuple[ErrorKind, float | None, int | None]


class MalformedResponseError(Exception):
    """The provider answered, but not with a body we can read (a proxy's HTML page, cut-off
    JSON). Usually a hiccup on the way, so it is worth retrying."""


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
