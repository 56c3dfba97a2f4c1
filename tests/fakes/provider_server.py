"""A fake LLM provider on loopback that speaks four wire formats, so tests drive the real SDKs.

`POST …/v1/chat/completions` answers like OpenAI Chat Completions, `…/v1/responses` like OpenAI
Responses, `…/v1/messages` like Anthropic Messages and `…/v1/embeddings` like OpenAI
Embeddings; any path prefix and query is accepted (`/run/abc/v1/messages?beta=true`). A body
with `"stream": true` gets server-sent events, one HTTP chunk per event, as the API streams
them (`provider_streams`). Each request takes the next behaviour from the script, or the
default (echo the last user message) when the script is empty:

```python
with ProviderServer() as server:
    server.script(
        Reply("Paris"),
        Reply(tool_calls=[ToolUse("get_weather", {"city": "Paris"})]),
        Fail(429, retry_after=2),
        Drop(),
        malformed(),
        Cut(after_events=3),  # a stream that ends early; abrupt=True closes mid-body
        Hold(release),  # every event but the last until the test sets `release`
    )
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
    ...
    assert server.last_request.json["model"] == "gpt-4o-mini"
```

`ProviderServer(default=RoundTrip())` answers agents without a script: a call of the first tool
offered, then, once the conversation holds the tool's result, a text that quotes it; the
answer is a pure function of the request, so concurrent trials get the same answers in any order.
Any `Model` does the same (`coding_model.WritesFile` answers real coding agents).

It records every request (path, query, lower-cased headers, body) and counts the TCP
connections it accepts. One thread per connection, so hundreds of concurrent connections are
fine; delays and holds are cut short when the server stops, and stopping closes the
connections clients keep alive, so `stop()` never hangs.
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
from typing import Any, Protocol, runtime_checkable

from tests.fakes import provider_streams as streams
from tests.fakes import provider_wire as wire
from tests.fakes.provider_wire import Api

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"
EMBEDDINGS_PATH = "/v1/embeddings"


# --- behaviours ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolUse:
    """A tool call in a scripted reply. `arguments` as a string is sent verbatim (OpenAI)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    custom: bool = False
    """A freeform custom tool call (Responses only: a `custom_tool_call` whose `input` is
    `arguments`, e.g. Codex's `apply_patch`); the other APIs render a function/tool_use call."""


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


@dataclass(frozen=True)
class RoundTrip:
    """One tool round trip, decided by the request alone: no script, the same answers in any order.

    While the request offers tools and its conversation holds no tool result, the answer is
    one call of `tool` (the first tool offered when None) with `arguments`, or when None with
    each required argument filled in: a string with the last user message's text, other types
    with an empty value. The call's id is a digest of that text and the tool's name. Once the
    conversation holds a tool result, the answer is `f"{answer}: {result}"` (the last result).
    Without tools it echoes the last user message. Every id in the answer is a digest of the
    request and `created` is fixed, so the whole answer depends on the request only.
    """

    tool: str | None = None
    arguments: Mapping[str, Any] | None = None
    answer: str = "The tool answered"
    delay: float = 0.0

    def reply_to(self, api: Api, request: dict[str, Any]) -> Reply:
        results = wire.tool_results(api, request)
        if results:
            return Reply(f"{self.answer}: {results[-1]}")
        text = wire.last_user_text(api, request)
        tools = dict(wire.offered_tools(api, request))
        if not tools:
            return Reply(text)
        name = self.tool or next(iter(tools))
        arguments = self.arguments
        if arguments is None:
            arguments = _required_arguments(tools.get(name, {}), text)
        prefix = "toolu_" if api == "messages" else "call_"
        return Reply(tool_calls=[ToolUse(name, arguments, id=prefix + wire.digest(name, text))])


def _required_arguments(schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    return {
        name: _argument_of_type(properties.get(name, {}).get("type"), text)
        for name in schema.get("required") or ()
        if isinstance(name, str)
    }


def _argument_of_type(kind: Any, text: str) -> Any:
    """`text` for a string (or an unknown type), an empty value of any other JSON type."""
    empty: dict[str, Any] = {
        "integer": 0,
        "number": 0,
        "boolean": False,
        "null": None,
        "array": [],
        "object": {},
    }
    return empty[kind] if isinstance(kind, str) and kind in empty else text


@runtime_checkable
class Model(Protocol):
    """A behaviour whose reply is a pure function of the request, like `RoundTrip`.

    Its answers get ids that are digests of the request and a fixed `created` time.
    """

    @property
    def delay(self) -> float: ...

    def reply_to(self, api: Api, request: dict[str, Any]) -> Reply: ...


Answer = Reply | Echo | Model
"""The behaviours that answer with a model's reply (which `Cut` and `Hold` then shape)."""


@dataclass(frozen=True)
class Cut:
    """Send the first `after_events` events of `reply`'s stream, then end the response early.

    The response ends cleanly (the chunked body is terminated, as if the provider had
    finished) or, with `abrupt`, the connection closes mid-body. A non-streamed answer counts
    as one event: 0 sends an empty body (abrupt: headers that promise a body, then the close).
    """

    after_events: int
    abrupt: bool = False
    reply: Answer = Echo()
    delay: float = 0.0


@dataclass(frozen=True)
class Hold:
    """Send every event of `reply`'s stream but the last, then wait for `release` to be set.

    Proves a client sees a stream as it comes, not buffered: the test reads the first events,
    then sets `release`. The wait lasts at most `timeout` seconds (then the last event goes
    anyway) and ends when the server stops (then the connection closes without it). A
    non-streamed answer is sent whole once released (its headers before).
    """

    release: threading.Event
    reply: Answer = Echo()
    timeout: float = 10.0
    delay: float = 0.0


Behaviour = Reply | Echo | Model | Fail | Drop | Raw | Cut | Hold


def malformed() -> Raw:
    """A 200 whose JSON body is cut off half-way."""
    return Raw(b'{"id": "broken", "choices": [{"index": 0, "mess')


# --- recorded requests --------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    """Without the query."""
    headers: Mapping[str, str]
    """Header names lower-cased."""
    body: bytes
    query: str = ""
    """What followed `?` in the request's target (e.g. `beta=true`)."""

    @property
    def api(self) -> Api | None:
        """The endpoint called: `chat`, `responses`, `messages` or `embeddings` (None: no route)."""
        return wire.api_of(self.path)

    @property
    def streamed(self) -> bool:
        """Whether the body asked for a stream (`"stream": true`)."""
        try:
            return self.json.get("stream") is True
        except (ValueError, TypeError):
            return False

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
        self._connections = 0
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
    def connections(self) -> int:
        """TCP connections accepted since the server was made or `reset()` (a replay: none)."""
        with self._lock:
            return self._connections

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
        """Forget the script and the recorded requests, and count connections from zero."""
        with self._lock:
            self._script.clear()
            self._recorded.clear()
            self.request_count = 0
            self._connections = 0
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

    def _accepted(self) -> None:
        with self._lock:
            self._connections += 1

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

    def _wait_for(self, release: threading.Event, timeout: float) -> bool:
        """Wait until `release` is set or `timeout` passed; False when the server began stopping."""
        deadline = time.monotonic() + timeout
        while not release.wait(0.02):
            if self._stopping.is_set():
                return False
            if time.monotonic() >= deadline:
                break
        return True


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
        self.fake._accepted()
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed ACK
    timeout = 60  # idle keep-alive connections end by themselves eventually
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._read_body()
        self._send_json(404, wire.openai_error(404, f"no route GET {self.path}", None, None))

    def do_POST(self) -> None:
        body = self._read_body()
        path, _, query = self.path.partition("?")
        api = wire.api_of(path)
        fake = self.server.fake
        recorded = RecordedRequest(
            method="POST",
            path=path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            query=query,
        )
        self.request_key = recorded.api_key
        self.request_authorization = recorded.headers.get("authorization")
        number = fake._begin(recorded)
        try:
            if api is None:
                self._send_json(404, wire.openai_error(404, f"no route POST {path}", None, None))
                return
            if fake.api_key is not None and recorded.api_key != fake.api_key:
                self._fail(api, Fail(401, "invalid API key"))
                return
            try:
                request = recorded.json
            except (ValueError, TypeError) as exc:
                self._fail(api, Fail(400, f"request body is not a JSON object: {exc}"))
                return
            behaviour = fake._next_behaviour()
            if not fake._sleep(fake.latency + behaviour.delay):
                self.close_connection = True
                return
            self._perform(api, behaviour, request, number)
        finally:
            fake._end()

    def _perform(self, api: Api, behaviour: Behaviour, request: dict[str, Any], n: int) -> None:
        if isinstance(behaviour, Drop):
            self.close_connection = True
        elif isinstance(behaviour, Fail):
            self._fail(api, behaviour)
        elif isinstance(behaviour, Raw):
            self._send(behaviour.status, behaviour.body, behaviour.content_type, behaviour.headers)
        else:
            shape = behaviour if isinstance(behaviour, Cut | Hold) else None
            answer = behaviour.reply if isinstance(behaviour, Cut | Hold) else behaviour
            if wire.streamed(api, request):
                self._send_stream(_events(api, answer, request, n), shape)
            else:
                self._send_whole(json.dumps(_body(api, answer, request, n)).encode(), shape)

    def _send_stream(self, events: list[bytes], shape: Cut | Hold | None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-request-id", "req_fake")
        self.end_headers()
        first = events
        if isinstance(shape, Cut):
            first = events[: max(0, shape.after_events)]
        elif isinstance(shape, Hold):
            first = events[:-1]
        for event in first:
            self._write_chunk(event)
        if isinstance(shape, Cut) and shape.abrupt:
            self.close_connection = True
            return
        if isinstance(shape, Hold):
            if not self.server.fake._wait_for(shape.release, shape.timeout):
                self.close_connection = True
                return
            self._write_chunk(events[-1])
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _send_whole(self, body: bytes, shape: Cut | Hold | None) -> None:
        sent = b"" if isinstance(shape, Cut) and shape.after_events < 1 else body
        abrupt = isinstance(shape, Cut) and shape.abrupt
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body if abrupt else sent)))
        self.send_header("x-request-id", "req_fake")
        self.end_headers()
        if isinstance(shape, Hold) and not self.server.fake._wait_for(shape.release, shape.timeout):
            self.close_connection = True
            return
        self.wfile.write(sent)
        if abrupt:
            self.close_connection = True

    def _fail(self, api: Api, fail: Fail) -> None:
        headers = dict(fail.headers)
        message = fail.message.replace("{api_key}", getattr(self, "request_key", None) or "")
        authorization = getattr(self, "request_authorization", None) or ""
        message = message.replace("{authorization}", authorization)
        if fail.retry_after is not None:
            value = fail.retry_after
            headers["retry-after"] = f"{value:g}" if isinstance(value, float | int) else value
        if api == "messages":
            body = wire.anthropic_error(fail.status, message, fail.error_type)
        else:
            body = wire.openai_error(fail.status, message, fail.error_type, fail.code)
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


def _reply(api: Api, answer: Answer, request: dict[str, Any], n: int) -> tuple[Reply, str, int]:
    """The reply, the id part of the answer's ids and its `created` time."""
    if isinstance(answer, Model):
        return answer.reply_to(api, request), wire.digest(request), wire.CREATED
    reply = Reply(wire.last_user_text(api, request)) if isinstance(answer, Echo) else answer
    return reply, str(n), int(time.time())


def _body(api: Api, answer: Answer, request: dict[str, Any], n: int) -> dict[str, Any]:
    if api == "embeddings":
        return wire.embeddings(request)
    reply, ident, created = _reply(api, answer, request, n)
    if api == "chat":
        return wire.chat_completion(reply, request, ident, created)
    if api == "responses":
        return wire.response_object(reply, request, ident, created)
    return wire.anthropic_message(reply, request, ident)


def _events(api: Api, answer: Answer, request: dict[str, Any], n: int) -> list[bytes]:
    reply, ident, created = _reply(api, answer, request, n)
    if api == "chat":
        return streams.chat_events(reply, request, ident, created)
    if api == "responses":
        return streams.responses_events(reply, request, ident, created)
    return streams.messages_events(reply, request, ident)


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
