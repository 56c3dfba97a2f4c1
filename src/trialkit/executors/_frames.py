"""The wire between the parent and its worker processes: one message per line.

Parent to worker: a JSON object per line (the first one is the set-up, then one per trial).
Worker to parent: `KIND [ID] PAYLOAD`, where the payload is JSON (`Trial.model_dump_json()`
for a trial: pydantic escapes newlines inside strings, so a message never spans lines).
"""

from __future__ import annotations


class Lines:
    """Splits a byte stream into lines, however the chunks cut them."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` completes (without their newline)."""
        if b"\n" not in chunk:
            self._parts.append(chunk)  # joined once, when the line ends: no quadratic copies
            return []
        head, *lines, tail = chunk.split(b"\n")
        first = b"".join([*self._parts, head]) if self._parts else head
        self._parts = [tail] if tail else []
        return [first, *lines]

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished line are waiting."""
        return bool(self._parts)
