"""Helpers for workspace diffs: binary detection, hashing, capped unified diffs."""

from __future__ import annotations

import codecs
import difflib
import hashlib
import os
from typing import NamedTuple

SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary."""


class FileInfo(NamedTuple):
    """What a workspace snapshot records about one file (or symlink)."""

    size: int
    sha256: str
    is_binary: bool
    link: str | None = None
    """The symlink's target text, when the entry is a symlink (its hash is of this text)."""


def is_binary(data: bytes, *, complete: bool = True) -> bool:
    """True when `data` has a NUL byte in its first 8 KB or is not UTF-8.

    With `complete=False` (a prefix of a larger file) a multi-byte character cut at the end
    is not counted against it.
    """
    if b"\0" in data[:SNIFF_BYTES]:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        return True
    return False


def open_nofollow(path: str | os.PathLike[str]) -> int:
    """Open a file for reading without following a symlink at its last component."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    return os.open(path, flags)


def read_info(path: str | os.PathLike[str], max_bytes: int) -> tuple[FileInfo, bytes | None]:
    """Hash a regular file without following symlinks; return its content when <= `max_bytes`."""
    digest = hashlib.sha256()
    fd = open_nofollow(path)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= max_bytes:
            data = fh.read()
            digest.update(data)
            return FileInfo(len(data), digest.hexdigest(), is_binary(data)), data
        head = fh.read(SNIFF_BYTES)
        digest.update(head)
        total = len(head)
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
            total += len(chunk)
        return FileInfo(total, digest.hexdigest(), is_binary(head, complete=False)), None


def link_info(target: str) -> FileInfo:
    raw = target.encode("utf-8", "surrogateescape")
    return FileInfo(len(raw), hashlib.sha256(raw).hexdigest(), False, target)


def unified_diff(
    before: str | None, after: str | None, path: str, max_bytes: int
) -> tuple[str, bool]:
    """A unified diff with `a/path` / `b/path` headers (`/dev/null` for an added or deleted
    file), cut at `max_bytes` of UTF-8; returns the text and whether it was cut."""
    a = (before or "").splitlines(keepends=True)
    b = (after or "").splitlines(keepends=True)
    parts: list[str] = []
    for line in difflib.unified_diff(
        a,
        b,
        fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}",
    ):
        if line.endswith("\n"):
            parts.append(line)
        else:
            parts.append(line + "\n\\ No newline at end of file\n")
    text = "".join(parts)
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text, False
    cut = raw[:max_bytes].decode("utf-8", "ignore")
    return cut + f"\n[trialkit: diff truncated at {max_bytes} bytes of {len(raw)}]\n", True
