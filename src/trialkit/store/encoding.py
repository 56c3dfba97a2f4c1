"""How values are encoded in the store's columns where the database cannot take them as they are.

- PostgreSQL refuses NUL (U+0000) in text, and SQLite's `substr` and `length` stop at the first
  one; model output can carry one. Free text columns store a string holding NUL (or starting
  with the marker below) escaped, reversibly; every other string is stored as it is, so the
  store's SQL (equality, ordering, prefixes) works on it unchanged.
- Large JSON (transcripts, outcomes) is packed: compressed, in a binary column, with a leading
  byte naming the encoding so another can be added later without a migration.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable

from sqlalchemy import Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from trialkit.store.errors import StoreError

ESCAPE = "\ufffe"
"""Starts an escaped string, and escapes NUL (`ESCAPE` + "0") and itself (`ESCAPE` twice) in it.
A noncharacter: valid in UTF-8 and in PostgreSQL text, and absent from real text."""
_ESCAPED_PAIR = re.compile(f"{ESCAPE}(.?)", re.DOTALL)
_UNESCAPE = {"0": "\x00", ESCAPE: ESCAPE, "": ""}

PACK_MIN_CHARS = 1024
"""JSON shorter than this is stored as text: compressing it saves too little to be worth it."""
ZLIB = b"z"
"""Leading byte of a packed value: zlib-compressed UTF-8 JSON."""
_ZLIB_LEVEL = 3  # 16% of a realistic transcript's JSON, ~45 µs; level 6: 14%, ~70 µs


def escape_nul(value: str) -> str:
    """`value` as PostgreSQL can store it: unchanged unless it holds NUL or starts with `ESCAPE`."""
    if "\x00" not in value and not value.startswith(ESCAPE):
        return value
    return ESCAPE + value.replace(ESCAPE, ESCAPE * 2).replace("\x00", ESCAPE + "0")


def unescape_nul(value: str) -> str:
    """The inverse of `escape_nul`. Also reads the start of an escaped string (what `substr`
    returns): an escape cut in half at the end is dropped."""
    if not value.startswith(ESCAPE):
        return value
    return _ESCAPED_PAIR.sub(lambda m: _UNESCAPE.get(m.group(1), m.group()), value[1:])


class SafeText(TypeDecorator[str]):
    """Free text that may hold NUL, escaped by `escape_nul` on the way in."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else escape_nul(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        # Anything but text (SQLite keeps any type in any column) is handed on as it is, for
        # the reader to refuse by its column: it is not this column type's to fail the read.
        return unescape_nul(value) if isinstance(value, str) else value


def pack_json(text: str) -> tuple[str, bytes | None]:
    """(text column, packed column) for a JSON document: small ones stay text."""
    if len(text) < PACK_MIN_CHARS:
        return text, None
    return "", ZLIB + zlib.compress(text.encode(), _ZLIB_LEVEL)


def pack_json_parts(parts: Iterable[str]) -> tuple[str, bytes | None]:
    """`pack_json` of the JSON document made of `parts`, compressed as they come: a large one
    is never held whole, as text or as bytes."""
    head: list[str] = []
    size = 0
    chunks = iter(parts)
    for part in chunks:
        head.append(part)
        size += len(part)
        if size >= PACK_MIN_CHARS:
            break
    else:
        return "".join(head), None
    packer = zlib.compressobj(_ZLIB_LEVEL)
    out = [ZLIB, packer.compress("".join(head).encode())]
    out.extend(packer.compress(part.encode()) for part in chunks)
    out.append(packer.flush())
    return "", b"".join(out)


def unpack_json(text: str, packed: bytes | None) -> str:
    """The JSON document stored as `pack_json` made it (or as text, before packing existed)."""
    if packed is None:
        return text
    packed = bytes(packed)  # psycopg returns memoryview for bytea
    if packed[:1] == ZLIB:
        return zlib.decompress(packed[1:]).decode()
    raise StoreError(f"unknown packed encoding {packed[:1]!r}: written by a newer trialkit?")
