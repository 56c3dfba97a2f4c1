"""Server-sent events framing: events from the chunks a connection gives, and their texts.

`EventDecoder` reads the WHATWG "event stream" format incrementally: bytes arrive in whatever
chunks the connection gives, and an event is dispatched at the blank line that ends it. Lines
are split as bytes, before decoding: a JSON string may hold U+2028 and similar characters,
which `str.splitlines` would take for line ends. `EventTexts` keeps each event's text as it
came, for a recording, without keeping the whole body.
"""

from __future__ import annotations

_BOM = b"\xef\xbb\xbf"

Event = tuple[str, str]
"""(the `event:` field, or "message" when the event named none; the `data:` lines joined)."""


class EventDecoder:
    """Turns chunks of an event stream into events: `feed` returns those each chunk completes.

    Lines end with LF, CRLF or CR; `:` starts a comment; a field is `name: value` (one space
    after the colon is dropped); `data` lines of one event are joined with LF; an event with no
    data line is no event. Fields other than `event` and `data` (`id`, `retry`) are ignored, and
    an event left open when the stream ends is never dispatched, as the format says.
    """

    def __init__(self) -> None:
        self._partial: list[bytes] = []
        """The start of a line whose end has not arrived yet."""
        self._after_cr = False
        """The last chunk ended with CR: an LF starting the next one belongs to it."""
        self._first_line = True
        self._event = ""
        self._data: list[str] = []
        self.not_utf8 = 0
        """Runs of whole lines that are not UTF-8 (read with U+FFFD in their place; the SDKs
        raise on them)."""

    def feed(self, chunk: bytes) -> list[Event]:
        if not chunk:
            return []
        if self._after_cr:
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if end < 0:
            self._partial.append(chunk)
            return []
        lines = chunk[: end + 1]
        if self._partial:
            lines = b"".join([*self._partial, lines])
            self._partial.clear()
        if end + 1 < len(chunk):
            self._partial.append(chunk[end + 1 :])
        self._after_cr = lines.endswith(b"\r")
        if not lines.isascii():
            try:
                lines.decode("utf-8")  # whole lines: no character is split at their ends
            except UnicodeDecodeError:
                self.not_utf8 += 1
        events: list[Event] = []
        for line in lines.splitlines():
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: bytes) -> Event | None:
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            return self._dispatch()
        if line[:1] == b":":
            return None
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        return None

    def _dispatch(self) -> Event | None:
        if not self._data:
            self._event = ""
            return None
        event = (self._event or "message", "\n".join(self._data))
        self._event = ""
        self._data = []
        return event


class EventTexts:
    """The text of each event of a stream, as it came, for a recording: fed chunk by chunk,
    like `EventDecoder`, and split where an event ends (CRLF read as LF), so that the body
    never has to be kept whole. An event the stream left open at its end is no event."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.carriage_returns = False
        """The stream used CR in its line ends (its events were rewritten with LF)."""
        self._pending: list[bytes] = []
        self._cr = False

    def feed(self, chunk: bytes) -> None:
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if chunk.endswith(b"\r"):
            chunk = chunk[:-1]
            self._cr = True
        if b"\r" in chunk:
            self.carriage_returns = True
            chunk = chunk.replace(b"\r\n", b"\n")
        if not chunk:
            return
        pending = self._pending
        if pending and pending[-1].endswith(b"\n") and chunk.startswith(b"\n"):
            pending[-1] = pending[-1][:-1]  # the blank line that ends an event spans two chunks
            self._event()
            chunk = chunk[1:]
        pieces = chunk.split(b"\n\n")
        for piece in pieces[:-1]:
            if piece:
                pending.append(piece)
            self._event()
        if pieces[-1]:
            pending.append(pieces[-1])

    def _event(self) -> None:
        text = b"".join(self._pending).decode("utf-8", "replace")
        self._pending.clear()
        if text.strip():
            self.events.append(text + "\n\n")
