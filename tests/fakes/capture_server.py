"""A loopback HTTP server that records every request: the far end of trace and score exports.

```python
with CaptureServer() as server:
    exporter = OtelExporter(server.url)
    ...
    assert server.requests[0].path == "/v1/traces"
```

Every request is recorded (method, path, lower-cased headers, body) and answered 200: OTLP
paths (`…/v1/traces`) with an empty protobuf body (an empty `ExportTraceServiceResponse`),
`/api/public/scores` like Langfuse (`{"id": …}`), anything else with `{}`. `fail(path, status)`
makes requests to a path answer an error instead. Stopping closes kept-alive connections, so
`stop()` never hangs.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class CapturedRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes
    """The body as sent, gunzipped when it was gzip-encoded."""

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class CaptureServer:
    """Records requests on 127.0.0.1 (a free port) and answers them 200 unless told to fail."""

    def __init__(self) -> None:
        self._recorded: list[CapturedRequest] = []
        self._failures: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the capture server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[CapturedRequest]:
        with self._lock:
            return list(self._recorded)

    def requests_to(self, path: str) -> list[CapturedRequest]:
        return [r for r in self.requests if r.path == path]

    def fail(
        self,
        path: str,
        status: int,
        body: bytes = b'{"message": "refused"}',
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer requests to `path` with `status`, `body` and `headers` from now on."""
        with self._lock:
            self._failures[path] = (status, body, dict(headers or {}))

    def start(self) -> CaptureServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.capture = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
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

    def __enter__(self) -> CaptureServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _record(self, request: CapturedRequest) -> tuple[int, bytes, dict[str, str]]:
        with self._lock:
            self._recorded.append(request)
            failure = self._failures.get(request.path)
        if failure is not None:
            status, body, headers = failure
            return status, body, {"Content-Type": "application/json", **headers}
        if request.path.endswith("/v1/traces"):
            return 200, b"", {"Content-Type": "application/x-protobuf"}
        if request.path == "/api/public/scores":
            try:
                score_id = request.json.get("id")
            except (ValueError, AttributeError):
                score_id = None
            answer = {"id": score_id or f"score-{next(self._ids)}"}
            return 200, json.dumps(answer).encode(), {"Content-Type": "application/json"}
        return 200, b"{}", {"Content-Type": "application/json"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    capture: CaptureServer

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
        pass  # a client that hung up is not worth a traceback


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        request = CapturedRequest(self.command, self.path.partition("?")[0], headers, body)
        status, payload, headers = self.server.capture._record(request)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
