"""A fake LLM provider on loopback that speaks two wire formats, so tests drive the real SDKs.

`POST /v1/chat/completions` answers like OpenAI Chat Completions and `POST /v1/messages` like
Anthropic Messages (no streaming). Each request takes the next behaviour from the script, or the
default (echo the last user message) when the script is empty:

```python
with ProviderServer() as server:
    server.script(
        Reply("Paris"),
        Reply(tool_calls=[ToolUse("get_weather", {"city": "Paris"})]),
        Fail(429, retry_after=2),
        Drop(),
        malformed(),
    )
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
    ...
    assert server.last_request.json["model"] == "gpt-4o-mini"
```

It records every request (path, lower-cased headers, body). One thread per connection, so
hundreds of concurrent connections are fine; delays are cut short when the server stops, and
stopping closes the connections clients keep alive, so `stop()` never hangs.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

Wire = Literal["openai", "anthropic"]

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


# --- behaviours ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolUse:
    """A tool call in a scripted reply. `arguments` as a string is sent verbatim (OpenAI)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful answer, rendered in the wire format of the endpoint that was called.

    `usage` is the provider's raw usage object as it goes on the wire (OpenAI:
    `prompt_tokens`, `prompt_tokens_details`...; Anthropic: `input_tokens`,
    `cache_read_input_tokens`...); when `None`, plausible counts are made up.
    `finish_reason` is sent verbatim (`stop`/`tool_calls`, or `end_turn`/`tool_use` by default).
    """

    text: str = ""
    tool_calls: Sequence[ToolUse] = ()
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    model: str | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Echo:
    """Answer with the text of the last user message."""

    delay: float = 0.0


@dataclass(frozen=True)
class Fail:
    """An HTTP error with the provider's error body; `retry_after` sets `Retry-After`."""

    status: int
    message: str = "scripted failure"
    """`{api_key}` in it is replaced by the key the request carried, `{authorization}` by its
    `Authorization` header (a provider that echoes them, as some do in an "invalid key" error)."""
    retry_after: float | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    error_type: str | None = None
    """The error's `type` (both formats); a fitting one for the status when `None`."""
    code: str | None = None
    """OpenAI's error `code`, e.g. `insufficient_quota`."""
    delay: float = 0.0


@dataclass(frozen=True)
class Drop:
    """Close the connection without sending a response."""

    delay: float = 0.0


@dataclass(frozen=True)
class Raw:
    """Exactly these bytes as the response body."""

    body: bytes
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay: float = 0.0


Behaviour = Reply | Echo | Fail | Drop | Raw


def malformed() -> Raw:
    """A 200 whose JSON body is cut off half-way."""
    return Raw(b'{"id": "broken", "choices": [{"index": 0, "mess')


# --- recorded requests --------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    """Header names lower-cased."""
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        data = json.loads(self.body)
        if not isinstance(data, dict):
            raise TypeError(f"request body is not a JSON object: {self.body[:80]!r}")
        return data

    @property
    def api_key(self) -> str | None:
        """The key sent as `x-api-key` or `Authorization: Bearer`."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None


# --- the server ---------------------------------------------------------------------------


class ProviderServer:
    """A scriptable fake OpenAI + Anthropic endpoint on 127.0.0.1 (a free port).

    `latency` is added to every answer (benchmarks: a model that takes exactly L seconds).
    With `api_key` set, requests carrying another key (or none) get a 401; otherwise any key
    is accepted. At most `max_recorded` requests are kept (the newest). `port` 0 takes a free one.
    """

    def __init__(
        self,
        *,
        default: Behaviour | None = None,
        latency: float = 0.0,
        api_key: str | None = None,
        max_recorded: int = 10_000,
        port: int = 0,
    ) -> None:
        self.port = port
        self.default: Behaviour = default if default is not None else Echo()
        self.latency = latency
        self.api_key = api_key
        self._script: deque[Behaviour] = deque()
        self._recorded: deque[RecordedRequest] = deque(maxlen=max_recorded)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._in_flight = 0
        self.max_in_flight = 0
        """The most requests that were being answered at the same time."""
        self.request_count = 0
        """Requests received in all (recorded or not)."""
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # scripting ---------------------------------------------------------------------------

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours; each request consumes the next one, then the default applies."""
        with self._lock:
            self._script.extend(behaviours)

    @property
    def pending(self) -> int:
        """Scripted behaviours not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._recorded)

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self._recorded:
                raise LookupError("the fake provider server has received no request")
            return self._recorded[-1]

    def reset(self) -> None:
        """Forget the script and the recorded requests."""
        with self._lock:
            self._script.clear()
            self._recorded.clear()
            self.request_count = 0
            self.max_in_flight = 0

    # lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake provider server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def start(self) -> ProviderServer:
        if self._httpd is not None:
            raise RuntimeError("the fake provider server is already running")
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-provider-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # used by the handler threads ---------------------------------------------------------

    def _begin(self, request: RecordedRequest) -> int:
        with self._lock:
            self._recorded.append(request)
            self.request_count += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        return next(self._ids)

    def _next_behaviour(self) -> Behaviour:
        with self._lock:
            return self._script.popleft() if self._script else self.default

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _sleep(self, seconds: float) -> bool:
        """Wait; False when the server began stopping meanwhile."""
        if seconds <= 0:
            return not self._stopping.is_set()
        return not self._stopping.wait(seconds)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    fake: ProviderServer

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
        """Wake the threads waiting on idle keep-alive connections, so they can end."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (a timeout test, a stopped server) is not worth a traceback.
        pass


_WIRES: dict[str, Wire] = {OPENAI_PATH: "openai", ANTHROPIC_PATH: "anthropic"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed ACK
    timeout = 60  # idle keep-alive connections end by themselves eventually
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._read_body()
        self._send_json(404, _openai_error(404, f"no route GET {self.path}", None, None))

    def do_POST(self) -> None:
        body = self._read_body()
        path = self.path.partition("?")[0]
        wire = _WIRES.get(path)
        fake = self.server.fake
        recorded = RecordedRequest(
            method="POST",
            path=path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        self.request_key = recorded.api_key
        self.request_authorization = recorded.headers.get("authorization")
        number = fake._begin(recorded)
        try:
            if wire is None:
                self._send_json(404, _openai_error(404, f"no route POST {path}", None, None))
                return
            if fake.api_key is not None and recorded.api_key != fake.api_key:
                self._fail(wire, Fail(401, "invalid API key"))
                return
            try:
                request = recorded.json
            except (ValueError, TypeError) as exc:
                self._fail(wire, Fail(400, f"request body is not a JSON object: {exc}"))
                return
            behaviour = fake._next_behaviour()
            if not fake._sleep(fake.latency + behaviour.delay):
                self.close_connection = True
                return
            self._perform(wire, behaviour, request, number)
        finally:
            fake._end()

    def _perform(self, wire: Wire, behaviour: Behaviour, request: dict[str, Any], n: int) -> None:
        if isinstance(behaviour, Drop):
            self.close_connection = True
        elif isinstance(behaviour, Fail):
            self._fail(wire, behaviour)
        elif isinstance(behaviour, Raw):
            self._send(behaviour.status, behaviour.body, behaviour.content_type, behaviour.headers)
        else:
            reply = Reply(_last_user_text(request)) if isinstance(behaviour, Echo) else behaviour
            render = _openai_completion if wire == "openai" else _anthropic_message
            self._send_json(200, render(reply, request, n))

    def _fail(self, wire: Wire, fail: Fail) -> None:
        headers = dict(fail.headers)
        message = fail.message.replace("{api_key}", getattr(self, "request_key", None) or "")
        authorization = getattr(self, "request_authorization", None) or ""
        message = message.replace("{authorization}", authorization)
        if fail.retry_after is not None:
            value = fail.retry_after
            headers["retry-after"] = f"{value:g}" if isinstance(value, float | int) else value
        if wire == "openai":
            body = _openai_error(fail.status, message, fail.error_type, fail.code)
        else:
            body = _anthropic_error(fail.status, message, fail.error_type)
        self._send_json(fail.status, body, headers)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers or {})

    def _send(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.send_header("x-request-id", "req_fake")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


# --- wire formats -------------------------------------------------------------------------


def _openai_completion(reply: Reply, request: dict[str, Any], n: int) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if reply.text or not reply.tool_calls else None,
        "refusal": None,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_fake_{n}_{index}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(dict(call.arguments)),
                },
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.usage is not None:
        usage = dict(reply.usage)
    else:
        prompt, completion = _count(request.get("messages")), _count(reply.text) + 1
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or request.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason
                or ("tool_calls" if reply.tool_calls else "stop"),
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def _anthropic_message(reply: Reply, request: dict[str, Any], n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for index, call in enumerate(reply.tool_calls):
        arguments: Any = call.arguments
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments)
        else:
            arguments = dict(arguments)
        content.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_fake_{n}_{index}",
                "name": call.name,
                "input": arguments,
            }
        )
    usage = (
        dict(reply.usage)
        if reply.usage is not None
        else {
            "input_tokens": _count(request.get("messages")) + _count(request.get("system")),
            "output_tokens": _count(reply.text) + 1,
        }
    )
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.get("model", "fake"),
        "content": content,
        "stop_reason": reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": usage,
    }


_OPENAI_ERROR_TYPES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def _openai_error(
    status: int, message: str, error_type: str | None, code: str | None
) -> dict[str, Any]:
    default_type, default_code = _OPENAI_ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": error_type or default_type,
            "param": None,
            "code": code or default_code,
        }
    }


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _anthropic_error(status: int, message: str, error_type: str | None) -> dict[str, Any]:
    default_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": error_type or default_type, "message": message},
        "request_id": "req_fake",
    }


def _last_user_text(request: dict[str, Any]) -> str:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _text_of(content: Any) -> str:
    """The text in a message's content: a string, or the text in a list of parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") == "text":
                    parts.append(str(part.get("text", "")))
                elif part.get("type") == "tool_result":
                    parts.append(_text_of(part.get("content")))
        return "".join(parts)
    return ""


def _count(value: Any) -> int:
    """A rough token count (1 per 4 characters of JSON), never zero."""
    if value is None:
        return 0
    return max(1, len(json.dumps(value)) // 4)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve in a process of its own (benchmarks: keep the server off the client's GIL)."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.provider_server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ProviderServer(latency=args.latency, port=args.port, max_recorded=0) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while not stop.wait(0.5):
                pass


if __name__ == "__main__":
    main()
