"""Error answers of the model APIs, read as one line for a person (the `wire` module's own)."""

from __future__ import annotations


def error_text(api: str, status: int, data: object) -> str:
    """One line for an error answer: `HTTP 429: <the error's message>`, or `HTTP 429` when the
    body says nothing usable. Reads OpenAI's `{"error": {"message", ...}}`, Anthropic's
    `{"type": "error", "error": {"type", "message"}}`, a bare `message` or `detail`, or a
    body that is plain text (not an HTML page). Never raises."""
    message = error_message(data)
    return f"HTTP {status}: {message}" if message else f"HTTP {status}"


_LONGEST_MESSAGE = 300


def error_message(data: object) -> str | None:
    """The message of an error object (a body, or an error event of a stream), on one line."""
    if isinstance(data, str):
        text = data.strip()
        return None if text.startswith("<") else _one_line(text)
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, str):
        return _one_line(error)
    fields = ("message", "code", "type") if isinstance(error, dict) else ("message", "detail")
    where = error if isinstance(error, dict) else data
    for name in fields:
        value = where.get(name)
        if isinstance(value, str) and value.strip():
            return _one_line(value)
    return None


def _one_line(text: str) -> str | None:
    line = " ".join(text.split())
    if len(line) > _LONGEST_MESSAGE:
        line = line[: _LONGEST_MESSAGE - 1] + "…"
    return line or None
