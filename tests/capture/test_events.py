"""Event texts kept for a recording, and text kept in blocks, whatever the chunking."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from trialkit.capture._events import EventDecoder, EventTexts
from trialkit.capture._sse import TextParts

EVENTS = [
    'event: message_start\ndata: {"type": "message_start"}',
    'data: {"choices": [{"delta": {"content": "é ü ✓ \\u2028"}}]}',
    ": a comment",
    "data: first line\ndata: second line",
    "data: [DONE]",
]


def chunked(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    edges = [0, *points, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges) if b > a]


@given(
    events=st.lists(st.sampled_from(EVENTS), min_size=1, max_size=6),
    crlf=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_event_texts_are_the_same_however_the_stream_is_cut(
    events: list[str], crlf: bool, cuts: list[int]
) -> None:
    end = "\r\n" if crlf else "\n"
    body = "".join(event.replace("\n", end) + end + end for event in events).encode()
    texts = EventTexts()
    for chunk in chunked(body, cuts):
        texts.feed(chunk)
    assert texts.events == [event + "\n\n" for event in events]
    assert texts.carriage_returns is crlf
    again, whole = EventDecoder(), EventDecoder()  # the texts read as the stream itself
    assert again.feed("".join(texts.events).encode()) == whole.feed(body)


def test_an_event_left_open_at_the_end_is_no_event() -> None:
    texts = EventTexts()
    texts.feed(b"data: 1\n\ndata: 2\n")
    assert texts.events == ["data: 1\n\n"]


def test_lines_that_are_not_utf8_are_counted_and_read_with_replacement() -> None:
    decoder = EventDecoder()
    assert decoder.feed(b'data: {"a": "\xff"}\n\n') == [("message", '{"a": "\ufffd"}')]
    assert decoder.not_utf8 == 1
    clean = EventDecoder()
    clean.feed("data: é\n\n".encode())
    assert clean.not_utf8 == 0


@given(st.lists(st.text(max_size=5), max_size=2_000))
def test_text_parts_join_to_the_pieces(pieces: list[str]) -> None:
    parts = TextParts()
    for piece in pieces:
        parts.append(piece)
    assert parts.text() == "".join(pieces)
    assert parts.text() == "".join(pieces)  # once joined, the same again
    assert bool(parts) is bool(pieces)
