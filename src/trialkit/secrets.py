"""Secrets never leave the process: every credential trialkit knows of is replaced by
`[REDACTED]` in what it stores, writes or prints (DESIGN §4).

The secrets known are

- the values of the environment variables whose names say they hold one: `*_API_KEY`,
  `*_APIKEY`, `*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, `*_PASSWD`, `*_PASSPHRASE`
  (`OPENAI_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `LANGFUSE_SECRET_KEY`...), read at each use;
- the values given to `register_secret` (the models register the `api_key` they are given,
  and the key and token of an SDK client passed in, see `register_client`).

A value shorter than `MIN_LENGTH` characters is not a secret (it would match ordinary text).
Whatever the source, a token after `Bearer ` (16 characters or more), and the value of an
`x-api-key` or `api-key` header written out as text, are redacted too.

`redact` works on text, `redact_json` on JSON text (it keeps it valid JSON), `redact_data` on
JSON-like data. The choke points that call them: `ErrorInfo` (every error message and
traceback), `ManagedModel` (model errors and recorded calls), the store's row builders, the
report and export writers and the command line's output.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

REDACTED = "[REDACTED]"
MIN_LENGTH = 8

_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE)S?$", re.IGNORECASE
)
_HEADER_TOKEN = re.compile(
    r"\b(?P<lead>Bearer\s+)[A-Za-z0-9._~+/=\-]{16,}"
    r"|\b(?P<name>(?i:x-api-key|api-key))(?P<sep>[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._~+/=\-]{8,}"
)
_HINT = re.compile(r"Bearer|(?i:api-key)")
"""What a text must contain for `_HEADER_TOKEN` to find anything: a quick test first."""


def _hinted(text: str) -> bool:
    """`_HINT.search(text)`, found faster: its case-blind part makes the regex step through
    every character (6 µs for a trial's 800), where `in` scans for a word. Only text that is
    not ASCII, in which `(?i)` also matches `İ`, `ı` and the Kelvin sign, goes to the regex."""
    if "Bearer" in text:
        return True
    if "-" not in text:
        return False
    if text.isascii():
        return "api-key" in text.lower()
    return _HINT.search(text) is not None


_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(*values: object) -> None:
    """Treat each of `values` (a string; others are ignored) as a secret from now on, in this
    process. A `Bearer TOKEN` value registers the token."""
    with _lock:
        for value in values:
            if not isinstance(value, str):
                continue
            value = value.strip()
            scheme, _, token = value.partition(" ")
            if scheme.lower() in ("bearer", "basic") and token:
                value = token.strip()
            if len(value) >= MIN_LENGTH:
                _registered.add(value)


def register_client(client: object) -> None:
    """Register the credentials an SDK client sends: its `api_key` and `auth_token` (the
    anthropic SDK sends a token as `Authorization: Bearer`), and the `Authorization`,
    `x-api-key` and `api-key` headers it was given."""
    if client is None:
        return
    register_secret(getattr(client, "api_key", None), getattr(client, "auth_token", None))
    for attribute in ("default_headers", "_custom_headers"):
        try:
            headers = getattr(client, attribute, None)
        except Exception:  # a property of a client we do not know
            continue
        if not isinstance(headers, dict):
            continue
        for name, value in headers.items():
            if isinstance(name, str) and name.lower() in ("authorization", "x-api-key", "api-key"):
                register_secret(value)


def known_secrets() -> frozenset[str]:
    """The secrets known now: the registered ones and those of the environment."""
    global _known
    data = getattr(os.environ, "_data", None)
    with _lock:
        count, seen = len(_registered), _known
        # Registered secrets are only ever added, so their count tells a change; comparing
        # the environment with the copy made last time costs a fraction of reading it again.
        if seen is not None and seen[0] == count and isinstance(data, dict) and seen[1] == data:
            return seen[2]
        registered = frozenset(_registered)
    known = _environment_secrets(_environment()) | registered
    if isinstance(data, dict):
        with _lock:
            _known = (count, dict(data), known)
    return known


_known: tuple[int, dict[Any, Any], frozenset[str]] | None = None
"""The last answer of `known_secrets`, with what it was computed from."""


def _environment() -> tuple[tuple[Any, Any], ...]:
    """The environment as it is now, cheaply (`os.environ` decodes each item it gives)."""
    data = getattr(os.environ, "_data", None)
    return tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())


@functools.lru_cache(maxsize=8)
def _environment_secrets(environment: tuple[tuple[Any, Any], ...]) -> frozenset[str]:
    found = set()
    for raw_name, raw_value in environment:
        name, value = _text(raw_name), _text(raw_value).strip()
        if _SECRET_NAME.search(name) and len(value) >= MIN_LENGTH:
            found.add(value)
    return frozenset(found)


def _text(value: str | bytes) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else value


_held = threading.local()


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Inside the block, this thread looks the known secrets up once, not at every string:
    for a batch of work that redacts thousands of strings (the store saving trials), whose
    secrets do not change meanwhile."""
    if getattr(_held, "pattern", _NOT_HELD) is not _NOT_HELD:
        yield  # nested: the outer block holds them
        return
    _held.pattern = _pattern(known_secrets())
    try:
        yield
    finally:
        _held.pattern = _NOT_HELD


_NOT_HELD: Any = object()


def _current_pattern() -> re.Pattern[str] | None:
    pattern = getattr(_held, "pattern", _NOT_HELD)
    if pattern is not _NOT_HELD:
        return pattern  # type: ignore[no-any-return]
    return _pattern(known_secrets())


@functools.lru_cache(maxsize=8)
def _pattern(secrets: frozenset[str]) -> re.Pattern[str] | None:
    forms = {form for secret in secrets for form in _forms(secret)}
    if not forms:
        return None
    return re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))


def _forms(secret: str) -> Iterable[str]:
    """The secret, and as it appears inside a JSON string."""
    yield secret
    yield json.dumps(secret)[1:-1]
    yield json.dumps(secret, ensure_ascii=False)[1:-1]


def redact(text: str) -> str:
    """`text` with every known secret, and every header-like token, replaced by `[REDACTED]`."""
    return _redact(text, _current_pattern())


def _redact(text: str, pattern: re.Pattern[str] | None) -> str:
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    if _hinted(text):
        text = _HEADER_TOKEN.sub(_header_replacement, text)
    return text


def _header_replacement(match: re.Match[str]) -> str:
    if match.group("lead") is not None:
        return match.group("lead") + REDACTED
    return match.group("name") + match.group("sep") + REDACTED


def needs_redaction(text: str) -> bool:
    """Whether `text` may hold something to redact, plain or inside JSON strings: a known
    secret, or a word (`Bearer`, `api-key`) a header-like token may follow."""
    pattern = _current_pattern()
    return bool(pattern is not None and pattern.search(text)) or _hinted(text)


def redact_data(value: Any) -> Any:
    """JSON-like data (dicts, lists, strings, numbers) with `redact` applied to every string,
    keys included. Data with nothing to redact is returned as it is (one search of all its
    strings at once decides that: a model request holds thousands of them)."""
    pattern = _current_pattern()
    strings: list[str] = []
    _strings_of(value, strings)
    every = "\x00".join(strings)
    if not ((pattern is not None and pattern.search(every)) or _hinted(every)):
        return value
    return _redact_data(value, pattern)


def _strings_of(value: Any, into: list[str]) -> None:
    if isinstance(value, str):
        into.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                into.append(key)
            _strings_of(item, into)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings_of(item, into)


def _redact_data(value: Any, pattern: re.Pattern[str] | None) -> Any:
    if isinstance(value, str):
        return _redact(value, pattern)
    if isinstance(value, dict):
        return {_redact_data(k, pattern): _redact_data(v, pattern) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_data(item, pattern) for item in value]
    return value


def redact_json(text: str) -> str:
    """JSON text with `redact` applied to each of its strings; still valid JSON. Text with
    nothing to redact is returned unchanged (the check is a search, not a parse)."""
    if not needs_redaction(text):
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return redact(text)
    return json.dumps(redact_data(data), ensure_ascii=False, separators=(",", ":"))


M = TypeVar("M", bound="BaseModel")


def redact_record(record: M) -> M:
    """A pydantic record with every string redacted: the same object when nothing is."""
    text = record.model_dump_json()
    if not needs_redaction(text):
        return record
    redacted = redact_json(text)
    return record if redacted == text else type(record).model_validate_json(redacted)


class RedactingStream:
    """A text stream that redacts what is written to it before passing it on: the command
    line wraps standard output and standard error in one, so no secret reaches a terminal or
    a CI log, whichever part of trialkit (or of the code it runs) prints it. Its `buffer`,
    for bytes, redacts too."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        raw = getattr(inner, "buffer", None)
        self.buffer = None if raw is None else _RedactingBuffer(raw)

    def write(self, text: str) -> int:
        if isinstance(text, str):
            self.inner.write(redact(text))
            return len(text)
        return self.inner.write(text)  # bytes: refused as the stream refuses them

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _RedactingBuffer:
    """The bytes side of a `RedactingStream` (UTF-8; bytes that are not pass unchanged)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, data: bytes) -> int:
        text = bytes(data).decode("utf-8", "surrogateescape")
        self.inner.write(redact(text).encode("utf-8", "surrogateescape"))
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def redact_standard_streams() -> Callable[[], None]:
    """Wrap `sys.stdout` and `sys.stderr` in `RedactingStream`s (unless they are already);
    returns the function that puts back what was there."""
    before = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, RedactingStream) and sys.stdout is not None:
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream) and sys.stderr is not None:
        sys.stderr = RedactingStream(sys.stderr)

    def restore() -> None:
        sys.stdout, sys.stderr = before

    return restore
