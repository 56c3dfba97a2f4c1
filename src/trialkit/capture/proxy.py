"""The model proxy: a loopback HTTP server that command-line agents take for their provider.

A command-line agent (Claude Code, Codex) calls its provider directly, from a process trialkit
does not run code in, so the hook on `httpx` cannot see its calls. `SubprocessAgent` points
the agent at this proxy instead (`ANTHROPIC_BASE_URL`, a Codex provider), one base URL per
trial:

    http://127.0.0.1:PORT/trialkit/<trial token>/anthropic      (Messages: /v1/messages...)
    http://127.0.0.1:PORT/trialkit/<trial token>/openai/v1      (Responses, Chat Completions)

The proxy sends each request on with an `httpx.AsyncClient`, in the calling trial's scope, so
the capture hook does what it does for an agent's own SDK client: the call goes in the trial's
transcript with the same cassette key, is answered from the cassette when the run replays
(nothing goes upstream), is a strict miss when it was never recorded, and is refused under
`--offline` when it would leave the machine. There is one implementation of all that, the
hook's; the proxy only carries bytes.

The upstream is what the agent would have used without trialkit: `ANTHROPIC_BASE_URL` /
`OPENAI_BASE_URL` from trialkit's own environment when set, else the provider's own host; a
trial may name another. The agent's key goes upstream in the headers it came in; headers are
never written anywhere. A request whose token is not one of a live trial's is refused (403);
a `HEAD` of a base URL (Claude Code's probe) is answered here. Request bodies may be
compressed (`gzip`, `deflate`, `zstd`, and `br` when `brotli` 1.2 or later is installed).

What a connection may take of the proxy is bounded (`ProxyLimits`, in `_proxy_http`): the token
is checked before a byte of the body is read, a body is at most 64 MiB read and decoded, the
request's headers, its body and an idle connection each have a time limit, and at most 256
connections are open at once (past that the longest-idle one is closed, or the new one gets
503 when all are serving requests).

The server runs on an event loop of its own, in a thread, so it serves whichever loop or
worker the trials run in; `shared_proxy()` gives this process's, started on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from trialkit.capture import _proxy_http as http
from trialkit.capture._proxy_http import ProxyLimits, Refusal
from trialkit.capture.hook import finish_at_close
from trialkit.models.cassette import CacheMode, CassetteError
from trialkit.models.context import ModelSettings, calls_as, use_settings
from trialkit.secrets import register_secret
from trialkit.transcript import TranscriptRecorder, activate, deactivate

__all__ = [
    "DEFAULT_UPSTREAMS",
    "Family",
    "ModelProxy",
    "ProxyError",
    "ProxyLimits",
    "ProxyTrial",
    "shared_proxy",
]

Family = Literal["anthropic", "openai"]
PREFIX: Final = "/trialkit/"
DEFAULT_UPSTREAMS: Final[dict[str, str]] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
}
"""The providers' own hosts: where an agent goes when no base URL is set. The OpenAI base
carries the API version, as `OPENAI_BASE_URL` does; the Anthropic one does not."""
UPSTREAM_ENV: Final[dict[str, str]] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
}
SETTLE_S: Final = 5.0
"""How long a trial's turn waits, after the agent exited, for the proxy to finish the
requests it was still passing on (the agent may exit on the last byte of an answer)."""

_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


_CREDENTIALS: Final = frozenset({b"x-api-key", b"authorization", b"api-key"})


class ProxyError(RuntimeError):
    """The model proxy could not start (no loopback interface, no free port)."""


def upstreams_from_env(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each family's upstream: `overrides`, else trialkit's `ANTHROPIC_BASE_URL` /
    `OPENAI_BASE_URL`, else the provider's host. Read when a trial starts, never cached."""
    found = {}
    for family, default in DEFAULT_UPSTREAMS.items():
        given = (overrides or {}).get(family) or os.environ.get(UPSTREAM_ENV[family]) or default
        found[family] = given.rstrip("/")
    return found


@dataclass(eq=False)
class ProxyTrial:
    """One trial's way in: its token, its base URLs, and what it is still passing on."""

    proxy: ModelProxy
    token: str
    recorder: TranscriptRecorder
    settings: ModelSettings
    upstreams: dict[str, str]
    in_flight: int = 0
    _idle: threading.Condition = field(default_factory=threading.Condition)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}{PREFIX}{self.token}"

    @property
    def anthropic_base_url(self) -> str:
        """For `ANTHROPIC_BASE_URL` (the SDKs add `/v1/messages`)."""
        return f"{self.base}/anthropic"

    @property
    def openai_base_url(self) -> str:
        """For `OPENAI_BASE_URL` and Codex's `base_url` (they add `/responses`...)."""
        return f"{self.base}/openai/v1"

    def settle(self, timeout: float = SETTLE_S) -> bool:
        """Wait until no request of this trial is in flight (blocking: run it in a thread);
        `False` when some still were after `timeout` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: self.in_flight == 0, timeout)

    def close(self) -> None:
        """Take the token back: later requests with it are refused."""
        self.proxy.forget(self)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        with self._idle:
            self.in_flight += 1
        try:
            yield
        finally:
            with self._idle:
                self.in_flight -= 1
                self._idle.notify_all()


class _Open:
    """An open connection: serving a request (`busy`), or idle since `since`."""

    __slots__ = ("busy", "since", "writer")

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.busy = False
        self.since = time.monotonic()

    def idle(self) -> None:
        self.busy, self.since = False, time.monotonic()


class ModelProxy:
    """The proxy server (see the module docs): `start()`, `open_trial()` per trial, `stop()`.
    `limits`: what a connection may take of it (`ProxyLimits`' defaults when not given)."""

    def __init__(self, limits: ProxyLimits | None = None) -> None:
        self.port = 0
        self.limits = limits or ProxyLimits()
        self.refused = 0
        """Requests refused for a missing or unknown token."""
        self.closed_idle = 0
        """Idle connections closed to make room for new ones (at `max_connections`)."""
        self.turned_away = 0
        """Connections answered 503: `max_connections` were open, all serving requests."""
        self._connections: set[_Open] = set()
        self._trials: dict[str, ProxyTrial] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._client: Any = None
        self._replay_client: Any = None
        self._users = 0

    # -- life ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ModelProxy:
        """Start serving on 127.0.0.1 (idempotent); returns self."""
        with self._lock:
            if self.running:
                return self
            from trialkit.capture.hook import install

            install()  # the client below is wrapped, whether or not a run installed it yet
            loop = asyncio.new_event_loop()
            ready: Future[None] = Future()
            thread = threading.Thread(
                target=self._run, args=(loop, ready), name="trialkit-model-proxy", daemon=True
            )
            thread.start()
            try:
                ready.result(timeout=30)
            except Exception as exc:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(5)
                raise ProxyError(f"the model proxy could not start on 127.0.0.1: {exc}") from exc
            self._loop, self._thread = loop, thread
            return self

    def _run(self, loop: asyncio.AbstractEventLoop, ready: Future[None]) -> None:
        from trialkit.transcript import mark_outside_trials

        mark_outside_trials()  # this thread serves every trial and belongs to none
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._open(ready))
        except BaseException as exc:  # reported to start()
            if not ready.done():
                ready.set_exception(exc)
            loop.close()
            return
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shut())
            loop.close()

    async def _open(self, ready: Future[None]) -> None:
        import httpx

        options: dict[str, Any] = {
            "timeout": httpx.Timeout(600.0, connect=30.0),
            "limits": httpx.Limits(max_connections=None, max_keepalive_connections=64),
            "follow_redirects": False,
        }
        self._client = httpx.AsyncClient(**options)
        # A run that replays sends nothing upstream: the capture hook answers model calls from
        # the cassette, and whatever else the agent asks for gets this transport's refusal.
        self._replay_client = httpx.AsyncClient(
            transport=httpx.MockTransport(_nothing_upstream), **options
        )
        self._server = await asyncio.start_server(  # `limit`: a connection's read buffer
            self._connection, "127.0.0.1", 0, limit=http.READ_SIZE
        )
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set_result(None)

    async def _shut(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        for client in (self._client, self._replay_client):
            if client is not None:
                await client.aclose()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        """Stop serving and close every connection (idempotent)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._trials.clear()
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    def acquire(self) -> ModelProxy:
        """Start (when not running) for one more user; `release` when done."""
        with self._lock:
            self._users += 1
        return self.start()

    def release(self) -> None:
        """One user fewer; the last one stops the proxy."""
        with self._lock:
            self._users = max(0, self._users - 1)
            last = self._users == 0
        if last:
            self.stop()

    # -- trials -------------------------------------------------------------------------------

    def open_trial(
        self,
        recorder: TranscriptRecorder,
        settings: ModelSettings,
        upstreams: Mapping[str, str] | None = None,
    ) -> ProxyTrial:
        """A token and base URLs for one trial; requests made with them are the trial's.
        Its calls are always captured: the proxy exists to see them (`--no-capture` is about
        the agent's in-process clients)."""
        self.start()
        token = secrets.token_urlsafe(18)
        trial = ProxyTrial(
            proxy=self,
            token=token,
            recorder=recorder,
            settings=replace(settings, capture=True),
            upstreams=upstreams_from_env(upstreams),
        )
        with self._lock:
            self._trials[token] = trial
        return trial

    def forget(self, trial: ProxyTrial) -> None:
        with self._lock:
            self._trials.pop(trial.token, None)

    # -- serving ------------------------------------------------------------------------------

    @property
    def open_connections(self) -> int:
        """Connections open now."""
        return len(self._connections)

    def _admit(self, writer: asyncio.StreamWriter) -> _Open | None:
        """A place for a new connection; past `max_connections`, the longest-idle one is
        closed for it, or None when every open one is serving a request."""
        if len(self._connections) >= self.limits.max_connections:
            idle = [slot for slot in self._connections if not slot.busy]
            if not idle:
                return None
            oldest = min(idle, key=lambda slot: slot.since)
            self._connections.discard(oldest)
            oldest.writer.transport.abort()  # its task sees the end of the stream and ends
            self.closed_idle += 1
        slot = _Open(writer)
        self._connections.add(slot)
        return slot

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        slot = self._admit(writer)
        if slot is None:
            self.turned_away += 1
            await http.overloaded(reader, writer, self.limits.max_connections)
        else:
            try:
                await self._serve(reader, writer, slot)
            finally:
                self._connections.discard(slot)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slot: _Open
    ) -> None:
        import h11

        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=http.MAX_HEAD_BYTES)
        try:
            while True:
                slot.idle()
                request = await http.read_head(conn, reader, self.limits)
                if request is None:
                    break
                target = request.target.decode("ascii", "replace")
                path, _, query = target.partition("?")
                token, family, rest = _route(path)
                with self._lock:
                    trial = self._trials.get(token or "")
                if trial is None:  # refused before a byte of its body is read
                    self.refused += 1
                    message = "the model proxy refused a request without the token of a live trial"
                    await http.send_error(conn, writer, 403, message, close=True)
                    await http.linger(reader)
                    break
                slot.busy = True
                body = await http.read_body(conn, reader, writer, request, self.limits)
                await self._answer(conn, writer, trial, request, body, (path, query, family, rest))
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except Refusal as exc:
            with contextlib.suppress(Exception):
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await http.send_error(conn, writer, exc.status, str(exc), close=True)
                    await http.linger(reader)
        except h11.RemoteProtocolError as exc:
            with contextlib.suppress(Exception):
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    message = f"bad request: {exc}"
                    await http.send_error(conn, writer, exc.error_status_hint, message, close=True)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # the proxy stops: the connection's task just ends
            pass
        except Exception as exc:  # a fault here: the agent gets a 500 that says so
            with contextlib.suppress(Exception):
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    message = f"model proxy: {type(exc).__name__}: {exc}"
                    await http.send_error(conn, writer, 500, message, close=True)

    async def _answer(
        self,
        conn: Any,
        writer: asyncio.StreamWriter,
        trial: ProxyTrial,
        request: Any,
        body: bytes,
        route: tuple[str, str, Family | None, str],
    ) -> None:
        path, query, family, rest = route
        if family is None:
            await http.send_error(
                conn,
                writer,
                404,
                f"no such route in the model proxy: {family_name(path)!r}; "
                "the base URLs end in /anthropic or /openai/v1",
            )
            return
        method = request.method.decode("ascii", "replace").upper()
        if method == "HEAD":
            headers = [(b"content-type", b"application/json")]
            await http.send(conn, writer, 200, headers, b"", head=True)
            return
        headers = [(k.lower(), v) for k, v in request.headers]
        for key, value in headers:  # any echo of the agent's key is redacted, like an SDK's
            if key in _CREDENTIALS:
                register_secret(value.decode("latin-1"))
        encoding = http.header(headers, b"content-encoding")
        body = http.decompressed(body, encoding, self.limits.max_body_bytes)
        url = trial.upstreams[family] + rest + (f"?{query}" if query else "")
        forward = [
            (k, v)
            for k, v in headers
            if k.decode("latin-1") not in _HOP_BY_HOP
            and k not in (b"content-encoding", b"accept-encoding")
        ]
        forward.append((b"accept-encoding", b"identity"))
        with trial.serving():
            await self._forward(conn, writer, trial, method, url, forward, body)

    async def _forward(
        self,
        conn: Any,
        writer: asyncio.StreamWriter,
        trial: ProxyTrial,
        method: str,
        url: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> None:
        import h11

        cassette = trial.settings.cassette
        replaying = cassette is not None and cassette.mode is CacheMode.REPLAY
        client = self._replay_client if replaying else self._client
        outgoing = client.build_request(method, url, headers=headers, content=body)
        token = activate(trial.recorder)
        try:
            with use_settings(trial.settings), calls_as("agent"), finish_at_close():
                try:
                    response = await client.send(outgoing, stream=True)
                except CassetteError as exc:  # the trial's error already (the cassette says so)
                    message = f"the model proxy could not replay {url}: {exc}"
                    await http.send_error(conn, writer, 500, message)
                    return
                except Exception as exc:  # the upstream cannot be reached: the agent is told
                    message = f"the model proxy could not reach {url}: {type(exc).__name__}: {exc}"
                    await http.send_error(conn, writer, 502, message)
                    return
            try:
                kept = [
                    (k, v)
                    for k, v in response.headers.raw
                    if k.decode("latin-1").lower() not in _HOP_BY_HOP
                ]
                writer.write(
                    conn.send(h11.Response(status_code=response.status_code, headers=kept))
                )
                async for chunk in response.stream:  # raw, as it came (aiter_raw would close)
                    if chunk:
                        writer.write(conn.send(h11.Data(data=chunk)))
                        await http.drain(writer, self.limits.write_timeout_s)
                writer.write(conn.send(h11.EndOfMessage()))
                await http.drain(writer, self.limits.write_timeout_s)
            finally:
                await response.aclose()  # the captured call is finished here, after the end
        finally:
            deactivate(token)


# -- the process's proxy --------------------------------------------------------------------

_shared: ModelProxy | None = None
_shared_pid = 0
_shared_lock = threading.Lock()


def shared_proxy() -> ModelProxy:
    """This process's proxy (a forked worker gets its own); not started until used."""
    global _shared, _shared_pid
    with _shared_lock:
        if _shared is None or _shared_pid != os.getpid():
            _shared, _shared_pid = ModelProxy(), os.getpid()
        return _shared


# -- HTTP plumbing --------------------------------------------------------------------------


def _route(path: str) -> tuple[str | None, Family | None, str]:
    """(token, family, the rest of the path) of `/trialkit/<token>/<family>/<rest>`."""
    if not path.startswith(PREFIX):
        return None, None, ""
    token, _, tail = path[len(PREFIX) :].partition("/")
    family, _, rest = tail.partition("/")
    rest = "/" + rest if rest else ""
    if family == "anthropic":
        return token, "anthropic", rest
    if family == "openai":
        if rest == "/v1" or rest.startswith("/v1/"):
            rest = rest[3:]  # the upstream base carries the version, as OPENAI_BASE_URL does
        return token, "openai", rest
    return token, None, rest


def family_name(path: str) -> str:
    """The segment of a proxy path where the family belongs (for an error message)."""
    return path[len(PREFIX) :].partition("/")[2].partition("/")[0]


def _nothing_upstream(request: Any) -> Any:
    import httpx

    message = (
        f"the run replays from a cassette, and {request.method} {request.url.path} is no "
        "recorded model call: nothing goes upstream"
    )
    error = {"type": "error", "error": {"type": "trialkit_proxy", "message": message}}
    return httpx.Response(404, json=error, headers={"x-should-retry": "false"})
