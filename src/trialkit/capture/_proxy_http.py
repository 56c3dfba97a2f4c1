"""The model proxy's HTTP/1.1 plumbing (h11 on asyncio streams), within bounds.

What one connection may take of the proxy is bounded (`ProxyLimits`): a request's line and
headers must arrive within `head_timeout_s` of its first byte, its body within
`body_timeout_s` of its headers, and a connection with no request under way is closed after
`idle_timeout_s`; a body is at most `max_body_bytes`, also once its content codings are undone
(decompression stops there, so a small deflate body cannot inflate to gigabytes); an answer
the client does not read for `write_timeout_s` ends its connection. Requests that break a bound
get an error answer (408, 413, 415) and their connection is closed, after a short wait that
lets the client read it. The proxy itself checks a request's token before reading its body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import zlib
from dataclasses import dataclass
from typing import Any, Final

READ_SIZE: Final = 65536
MAX_HEAD_BYTES: Final = 256 * 1024
"""A request's line and headers (h11's bound on an incomplete event)."""
LINGER_S: Final = 2.0
"""How long a connection closed on an error answer is read (and its bytes dropped) first, so
that the client gets the answer rather than a reset."""


@dataclass(frozen=True, slots=True)
class ProxyLimits:
    """What one connection may take of the model proxy, and how many may be open at once."""

    max_body_bytes: int = 64 * 1024 * 1024
    """A request body, as sent and once decoded: 64 MiB (larger ones get 413)."""
    max_connections: int = 256
    """Connections open at once. A new one past it closes the connection idle the longest (one
    waiting for a request, or for the rest of the headers of one whose token was not checked
    yet); when every one is serving a request, the new one gets 503 and is closed."""
    head_timeout_s: float = 10.0
    """A request's line and headers, from its first byte (408 after it)."""
    body_timeout_s: float = 60.0
    """A request's body, from the end of its headers (408 after it)."""
    idle_timeout_s: float = 60.0
    """A connection with no request under way (new, or kept alive between two) is closed."""
    write_timeout_s: float = 120.0
    """An answer the client leaves unread this long (the socket's buffer full) ends it."""


class Refusal(Exception):
    """A request the proxy answers with an error status, then closes the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# -- reading a request --------------------------------------------------------------------------


async def read_head(conn: Any, reader: asyncio.StreamReader, limits: ProxyLimits) -> Any:
    """The next request's line and headers (an `h11.Request`), or None when the client is done:
    it closed the connection, or sent nothing for `idle_timeout_s`. `Refusal` (408) when the
    head began but did not end within `head_timeout_s`."""
    import h11

    loop = asyncio.get_running_loop()
    started = False
    try:
        async with asyncio.timeout(limits.idle_timeout_s) as timer:
            while True:
                if not started and conn.trailing_data[0]:
                    started = True  # part of it came with the request before
                    timer.reschedule(loop.time() + limits.head_timeout_s)
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(READ_SIZE)
                    if data and not started:
                        started = True
                        timer.reschedule(loop.time() + limits.head_timeout_s)
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    return event
                else:  # ConnectionClosed, or PAUSED: the client is done
                    return None
    except TimeoutError:
        if not started:
            return None
        raise Refusal(
            408, f"the request's line and headers did not arrive within {limits.head_timeout_s:g} s"
        ) from None


async def read_body(
    conn: Any,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    request: Any,
    limits: ProxyLimits,
) -> bytes:
    """The body of `request`, whole: `Refusal` 413 past `max_body_bytes` (at once when its
    `content-length` says so), 408 when it did not all arrive within `body_timeout_s`. A
    client that waits to be told (`Expect: 100-continue`) is told to send it."""
    import h11

    declared = header(request.headers, b"content-length")
    if declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise Refusal(413, _too_large(limits))
    if conn.they_are_waiting_for_100_continue:
        writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
    parts: list[bytes] = []
    size = 0
    deadline = asyncio.get_running_loop().time() + limits.body_timeout_s
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:  # timed only when it waits: most bodies came with the head
            try:
                async with asyncio.timeout_at(deadline):
                    data = await reader.read(READ_SIZE)
            except TimeoutError:
                raise Refusal(
                    408, f"the request's body did not arrive within {limits.body_timeout_s:g} s"
                ) from None
            conn.receive_data(data)
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > limits.max_body_bytes:
                raise Refusal(413, _too_large(limits))
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return b"".join(parts)
        else:
            raise ConnectionError("the client closed the connection mid-request")


def _too_large(limits: ProxyLimits) -> str:
    return f"the request body is over the {limits.max_body_bytes:,} bytes the model proxy takes"


def header(headers: Any, name: bytes) -> str:
    for key, value in headers:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return ""


# -- content codings, undone within bounds ------------------------------------------------------


def decompressed(body: bytes, encoding: str, limit: int) -> bytes:
    """The request body without its content codings (applied in order, undone in reverse); no
    stage ever holds more than `limit` bytes (+ one piece). `Refusal` 413 past `limit`, 415 for
    a coding the proxy does not read or a body that is not what its coding says."""
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    for coding in reversed(codings):
        if coding != "identity":
            body = _decode(body, coding, limit)
    return body


_PIECE = 1 << 20
"""Decompressed a piece at a time: one call for the whole output would hold it twice."""


def _over(limit: int) -> Refusal:
    return Refusal(413, f"the request body is over {limit:,} bytes uncompressed")


def _decode(body: bytes, coding: str, limit: int) -> bytes:
    try:
        if coding in ("gzip", "x-gzip"):
            return _inflate(body, limit, wbits=16 + zlib.MAX_WBITS, members=True)
        if coding == "deflate":
            try:
                return _inflate(body, limit, wbits=zlib.MAX_WBITS)
            except zlib.error:
                return _inflate(body, limit, wbits=-zlib.MAX_WBITS)  # raw deflate, as some send
        if coding == "zstd":
            return _zstd(body, limit)
        if coding == "br":
            return _brotli(body, limit)
    except Refusal:
        raise
    except Exception as exc:
        raise Refusal(415, f"the request body is not valid {coding}: {exc}") from exc
    raise Refusal(415, f"the request body's content coding {coding!r} is not one the proxy reads")


def _inflate(body: bytes, limit: int, *, wbits: int, members: bool = False) -> bytes:
    """zlib, raw deflate or gzip (every member of it: a body may be several, one after
    another), a piece of at most 1 MiB at a time, stopping once past `limit`."""
    out: list[bytes] = []
    size = 0
    while True:
        inflater = zlib.decompressobj(wbits)
        pending = body
        while not inflater.eof:
            piece = inflater.decompress(pending, _PIECE)
            pending = inflater.unconsumed_tail
            if not (piece or pending):
                break  # all read, nothing more out: it ends early
            size += len(piece)
            if size > limit:
                raise _over(limit)
            out.append(piece)
        if not inflater.eof:
            raise ValueError("the compressed stream ends early")
        body = inflater.unused_data
        if not (members and body):
            return b"".join(out)


def _zstd(body: bytes, limit: int) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise Refusal(
            415, "the request body is zstd-compressed: pip install zstandard to accept it"
        ) from None
    reader = zstandard.ZstdDecompressor().stream_reader(body, read_across_frames=True)
    out: list[bytes] = []  # every frame: a body may be several
    size = 0
    while size <= limit:
        piece = reader.read(min(_PIECE, limit + 1 - size))
        if not piece:
            return b"".join(out)
        out.append(piece)
        size += len(piece)
    raise _over(limit)


def _brotli(body: bytes, limit: int) -> bytes:
    try:
        import brotli  # type: ignore[import-not-found]
    except ImportError:
        brotli = None
    decompressor = brotli.Decompressor() if brotli is not None else None
    try:
        first = decompressor.process(body, output_buffer_limit=limit + 1) if decompressor else None
    except TypeError:  # a brotli older than 1.2 cannot bound what it inflates
        first = None
    if decompressor is None or first is None:
        raise Refusal(
            415, "the request body is brotli-compressed: pip install 'brotli>=1.2' to accept it"
        )
    out, size = [first], len(first)
    while size <= limit and not decompressor.is_finished():
        piece = decompressor.process(b"", output_buffer_limit=limit + 1 - size)
        if not piece:
            raise ValueError("the compressed stream ends early")
        out.append(piece)
        size += len(piece)
    if size > limit:
        raise _over(limit)
    return b"".join(out)


# -- answering ----------------------------------------------------------------------------------


async def send(
    conn: Any,
    writer: asyncio.StreamWriter,
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    *,
    head: bool = False,
) -> None:
    import h11

    headers = [*headers, (b"content-length", str(len(body)).encode())]
    writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
    if body and not head:
        writer.write(conn.send(h11.Data(data=body)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()


def error_body(message: str) -> bytes:
    """An error in a shape both SDK families read."""
    return json.dumps(
        {"type": "error", "error": {"type": "trialkit_proxy", "message": message}}
    ).encode()


async def send_error(
    conn: Any, writer: asyncio.StreamWriter, status: int, message: str, *, close: bool = False
) -> None:
    """An error answer that SDKs do not retry; `close`: the connection ends after it."""
    headers = [(b"content-type", b"application/json"), (b"x-should-retry", b"false")]
    if close:
        headers.append((b"connection", b"close"))
    await send(conn, writer, status, headers, error_body(message))


async def drain(writer: asyncio.StreamWriter, seconds: float) -> None:
    """`writer.drain()`, which must not wait longer than `seconds` for the client to read
    (timed only when it would wait: the socket's buffer is over its high-water mark)."""
    transport = writer.transport
    if transport.get_write_buffer_size() <= transport.get_write_buffer_limits()[1]:
        await writer.drain()
        return
    try:
        async with asyncio.timeout(seconds):
            await writer.drain()
    except TimeoutError:
        raise ConnectionError(f"the client read nothing of the answer for {seconds:g} s") from None


async def linger(reader: asyncio.StreamReader, seconds: float = LINGER_S) -> None:
    """Read and drop what the client still sends, until it closes or `seconds` pass: closing
    a socket with unread bytes resets it, and the client would lose the answer sent."""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(seconds):
            while await reader.read(READ_SIZE):
                pass


async def overloaded(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_connections: int
) -> None:
    """The answer to a connection past `max_connections` when every open one is serving a
    request: 503 with `retry-after` (SDKs retry it), then close. Written raw: nothing of the
    request is read or parsed."""
    body = error_body(
        f"the model proxy has {max_connections} connections serving requests, its most; try again"
    )
    head = (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"retry-after: 1\r\nconnection: close\r\ncontent-length: " + str(len(body)).encode()
    )
    with contextlib.suppress(ConnectionError):
        writer.write(head + b"\r\n\r\n" + body)
        writer.write_eof()
        await linger(reader, LINGER_S / 4)
