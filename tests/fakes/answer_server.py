"""A loopback HTTP server that answers each request with exactly the bytes a test scripts.

`ProviderServer` speaks the APIs as providers do; this one sends what a test says, down to the
transport: a content encoding (gzip, deflate, br, zstd, stacked), a chunked stream, a
Content-Length that promises more than comes, a connection closed or reset mid-body.

```python
with AnswerServer() as server:
    server.script(
        Answer(b"<html>bad gateway</html>", content_type="text/html"),
        lambda received: Answer(stream=[b"data: {...}\\n\\n", b"data: [DONE]\\n\\n"],
                                encoding="gzip"),
    )
    client = OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
```

Each request takes the next scripted item (an `Answer`, or a function of the `Received`
request that returns one); with the script empty, the `default` answers (a 404 when none).
Every request is recorded (path, lower-cased headers, body). Stopping closes kept-alive
connections, so `stop()` never hangs.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class Answer:
    """One response, byte for byte.

    `body` is sent whole (with its Content-Length unless `length` says another); `stream`
    instead sends each piece as one HTTP chunk (chunked transfer encoding), compressed piece
    by piece and flushed when `encoding` is set, so a client sees each event as it comes.
    `encoding` is the Content-Encoding, applied in the order listed (`"gzip, deflate"`
    deflates the gzip); the codings the server cannot make (`br` without `brotli`) raise.
    `end` is how the response ends: `clean` (the connection stays open), `close` (closed after
    the body), `reset` (a TCP reset right after the body). `length`, with `end="close"` or
    `"reset"`, announces more than is sent: a body cut short.
    """

    body: bytes = b""
    status: int = 200
    content_type: str | None = "application/json"
    stream: Sequence[bytes] | None = None
    encoding: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    length: int | None = None
    end: Literal["clean", "close", "reset"] = "clean"


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    """Without the query."""
    headers: Mapping[str, str]
    """Header names lower-cased."""
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def request(self) -> dict[str, Any]:
        """The body's JSON object (`{}` when it is none)."""
        try:
            data = self.json
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}


Item = Answer | Callable[[Received], Answer]


def can_encode(coding: str) -> bool:
    """Whether this server can apply the content coding `coding`."""
    try:
        _encoder(coding)
    except (ImportError, ValueError):
        return False
    return True


class _Encoder(Protocol):
    def compress(self, data: bytes) -> bytes: ...

    def flush(self, mode: int = ...) -> bytes: ...


class _Brotli:
    def __init__(self) -> None:
        import brotli  # type: ignore[import-not-found]

        self._inner = brotli.Compressor()

    def compress(self, data: bytes) -> bytes:
        return bytes(self._inner.process(data)) + bytes(self._inner.flush())

    def flush(self, mode: int = 0) -> bytes:
        return bytes(self._inner.finish()) if mode == zlib.Z_FINISH else b""


class _Zstd:
    def __init__(self) -> None:
        import zstandard  # type: ignore[import-not-found]

        self._inner = zstandard.ZstdCompressor().compressobj()
        self._flush_block = zstandard.COMPRESSOBJ_FLUSH_BLOCK

    def compress(self, data: bytes) -> bytes:
        return bytes(self._inner.compress(data)) + bytes(self._inner.flush(self._flush_block))

    def flush(self, mode: int = 0) -> bytes:
        return bytes(self._inner.flush()) if mode == zlib.Z_FINISH else b""


def _encoder(coding: str) -> _Encoder | None:
    name = coding.strip().lower()
    if name == "identity":
        return None
    if name == "gzip":
        return zlib.compressobj(wbits=31)
    if name == "deflate":
        return zlib.compressobj(wbits=15)
    if name == "br":
        return _Brotli()
    if name == "zstd":
        return _Zstd()
    raise ValueError(f"unknown content coding {coding!r}")


class _Encoding:
    """The codings of a Content-Encoding, applied piece by piece."""

    def __init__(self, encoding: str | None) -> None:
        codings = [c for c in (encoding or "").split(",") if c.strip()]
        self._encoders = [e for e in map(_encoder, codings) if e is not None]

    def piece(self, data: bytes) -> bytes:
        for encoder in self._encoders:
            data = encoder.compress(data) + encoder.flush(zlib.Z_SYNC_FLUSH)
        return data

    def end(self) -> bytes:
        data = b""
        for encoder in self._encoders:
            data = encoder.compress(data) + encoder.flush(zlib.Z_FINISH)
        return data

    def whole(self, body: bytes) -> bytes:
        for encoder in self._encoders:
            body = encoder.compress(body) + encoder.flush(zlib.Z_FINISH)
        return body


class AnswerServer:
    """Answers on 127.0.0.1 (a free port) with scripted `Answer`s."""

    def __init__(self, default: Item | None = None) -> None:
        self.default = default
        self._script: deque[Item] = deque()
        self._received: list[Received] = []
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def script(self, *items: Item) -> None:
        with self._lock:
            self._script.extend(items)

    @property
    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the answer server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def start(self) -> AnswerServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.answers = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="answer-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> AnswerServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _next(self, received: Received) -> Answer:
        with self._lock:
            self._received.append(received)
            item = self._script.popleft() if self._script else self.default
        if item is None:
            return Answer(b'{"error": {"message": "nothing scripted"}}', status=404)
        if isinstance(item, Answer):
            return item
        return item(received)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    answers: AnswerServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up, or a reset made on purpose


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 30
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        received = Received(
            method=self.command,
            path=self.path.partition("?")[0],
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        self._answer(self.server.answers._next(received))

    do_GET = do_POST
    do_HEAD = do_POST

    def _answer(self, answer: Answer) -> None:
        encoding = _Encoding(answer.encoding)
        self.send_response(answer.status)
        if answer.content_type is not None:
            self.send_header("content-type", answer.content_type)
        if answer.encoding is not None:
            self.send_header("content-encoding", answer.encoding)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        if answer.stream is not None:
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for piece in answer.stream:
                data = encoding.piece(piece)
                if data:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            if answer.end == "clean":
                last = encoding.end()
                if last:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(last), last))
                self.wfile.write(b"0\r\n\r\n")
        else:
            body = encoding.whole(answer.body)
            length = len(body) if answer.length is None else answer.length
            self.send_header("content-length", str(length))
            self.end_headers()
            self.wfile.write(body)
        self.wfile.flush()
        if answer.end == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        elif answer.end == "close":
            self.close_connection = True
