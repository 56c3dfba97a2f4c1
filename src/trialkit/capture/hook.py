"""The hook: `send` of `httpx` and `httpx2` clients, wrapped once for the whole process.

The official SDKs (openai, anthropic) and the frameworks on them send through `httpx2`; litellm
through `httpx`. A wrap of `Client.send` and `AsyncClient.send` on the classes sees every
request of both, sync or async, streamed or not, from clients made before the wrap as well as
after (a wrap at the transport would miss litellm's async path). Outside a trial, and for
requests that are no model call, the wrap costs one context-variable lookup and passes the
request on untouched.

A streamed answer reaches the caller chunk by chunk as it arrives: the hook tees the response's
byte stream (a subclass of the library's own stream class, which `close()` expects) and
decides at the stream's end, or when the caller closes it, what the call was.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib.abc
import importlib.machinery
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextvars import ContextVar
from types import ModuleType
from typing import Any

from trialkit.capture import wire
from trialkit.capture.calls import SSE, CapturedCall
from trialkit.capture.scope import (
    Scope,
    active,
    carry_into_threads,
    check_offline,
    guard_sockets,
)
from trialkit.models.cassette import CassetteMiss
from trialkit.transcript import mark_outside_trials

MODULES = ("httpx", "httpx2")
_MARK = "_trialkit_capture"
_lock = threading.Lock()
_finish_at_close: ContextVar[bool] = ContextVar("trialkit_finish_at_close", default=False)


@contextlib.contextmanager
def finish_at_close() -> Iterator[None]:
    """Streams of the live answers to requests sent inside are recorded when they are closed,
    not as soon as their last byte is read: the model proxy passes the end of an answer on
    to the agent first, so recording it adds nothing to the agent's wait."""
    token = _finish_at_close.set(True)
    try:
        yield
    finally:
        _finish_at_close.reset(token)


def install(*, offline: bool = False) -> None:
    """Wrap the clients of `httpx` and `httpx2` (idempotent): now for a module imported
    already, else as soon as it is imported (so a module nobody uses is never loaded for
    nothing). Called when a run starts, from the run's own context; `offline` also guards
    every socket of a trial (`scope.guard_sockets`)."""
    mark_outside_trials()
    carry_into_threads()
    if offline:
        guard_sockets()
    with _lock:
        for name in MODULES:
            module = sys.modules.get(name)
            if module is not None:
                _wrap(module)
        if not any(isinstance(finder, _WrapOnImport) for finder in sys.meta_path):
            sys.meta_path.insert(0, _WrapOnImport())


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Wraps `httpx` / `httpx2` right after they are first imported."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _WrappingLoader(spec.loader)
                return spec
        return None


class _WrappingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        with _lock:
            _wrap(module)


def _wrap(module: ModuleType) -> None:
    client, async_client = module.Client, module.AsyncClient
    if getattr(client.send, _MARK, False):
        return
    send, asend = client.send, async_client.send
    streams = _Streams(module)

    @functools.wraps(send)
    def captured_send(self: Any, request: Any, **kwargs: Any) -> Any:
        scope = active()
        if scope is None:
            return send(self, request, **kwargs)
        call, answer = _start(scope, request)
        if answer is not None:
            response = streams.replay(request, answer, sync=True)
            if not kwargs.get("stream", False):
                response.read()
            return response
        if call is None:
            return send(self, request, **kwargs)
        try:
            response = send(self, request, **kwargs)
        except BaseException as exc:
            call.broke(exc)
            raise
        return _watch(call, response, streams, sync=True)

    @functools.wraps(asend)
    async def captured_asend(self: Any, request: Any, **kwargs: Any) -> Any:
        scope = active()
        if scope is None:
            return await asend(self, request, **kwargs)
        call, answer = _start(scope, request)
        if answer is not None:
            response = streams.replay(request, answer, sync=False)
            if not kwargs.get("stream", False):
                await response.aread()
            return response
        if call is None:
            return await asend(self, request, **kwargs)
        try:
            response = await asend(self, request, **kwargs)
        except BaseException as exc:
            call.broke(exc)
            raise
        return _watch(call, response, streams, sync=False)

    setattr(captured_send, _MARK, True)
    setattr(captured_asend, _MARK, True)
    client.send = captured_send
    async_client.send = captured_asend


def _start(scope: Scope, request: Any) -> tuple[CapturedCall | None, dict[str, Any] | None]:
    """The captured call for `request` (`None`: let it pass untouched) and the answer to give
    without sending it: a recording, or the refusal of a replay miss or of `--offline` (which
    only refuses what would leave: a recorded answer sends nothing)."""
    url = request.url
    method = request.method
    where = f"{url.scheme}://{url.netloc.decode('ascii', 'replace').rpartition('@')[2]}{url.path}"
    api = wire.recognise(method, url.path)
    call = _capture(scope, api, method, where, request)
    if call is not None:
        try:
            answer = call.replayed()
        except CassetteMiss as miss:
            return call, refused(api, MISS_STATUS, str(miss))
        if answer is not None:
            return call, answer
    refusal = check_offline(scope, method, where, url.host)
    if refusal is not None:
        if call is not None:
            call.refused(refusal)
        return None, refused(api, OFFLINE_STATUS, str(refusal))
    return call, None


MISS_STATUS = 400
"""The status of the answer to a replay miss: one that SDKs and frameworks do not read as
"no such model" (404) or "rate limited" (429), and, with `x-should-retry: false`, retry."""
OFFLINE_STATUS = 403


def _capture(
    scope: Scope, api: wire.Api | None, method: str, where: str, request: Any
) -> CapturedCall | None:
    if scope.own or api is None or not scope.settings.capture:
        return None
    try:
        body = json.loads(request.content)
    except (ValueError, AttributeError, TypeError):  # a streaming upload, or no JSON: not ours
        return None
    if not isinstance(body, dict) or wire.model_of(body) is None:
        return None
    return CapturedCall(scope, api, method, where, body)


def refused(api: wire.Api | None, status: int, message: str) -> dict[str, Any]:
    """An error answer made here, in the API's own error format, that SDKs do not retry
    (`x-should-retry: false`): the trial's error says what happened, whatever the SDK makes
    of it."""
    first = message.splitlines()[0]
    if api == "messages":
        error = {"type": "error", "error": {"type": "trialkit_refused", "message": first}}
    else:
        error = {"error": {"message": first, "type": "trialkit_refused", "code": None}}
    return {"status": status, "content_type": "application/json", "json": error, "refused": True}


def _watch(call: CapturedCall, response: Any, streams: _Streams, *, sync: bool) -> Any:
    """Let the live answer through, seeing its body as the caller reads it."""
    call.begin(response.status_code, response.headers.get("content-type", ""))
    if hasattr(response, "_content"):  # read already (`send(stream=False)`)
        try:
            call.feed(response.content)
            call.finish(ended=True)
        except Exception as exc:
            call.lost(exc)
        return response
    decoder = streams.decoder(response, call)
    response.stream = streams.tee(response.stream, call, decoder, sync=sync)
    return response


class _Decoder:
    """Undoes a response's content encoding as its caller does, with the decoder the HTTP
    module itself makes for the response's headers (`httpx` returns bytes, `httpx2` an
    iterator of them). It never raises: a body the caller cannot decode either (corrupt
    gzip) makes the call's answer unusable, and nothing more is decoded."""

    __slots__ = ("_call", "_inner", "_name")

    def __init__(self, inner: Any, call: CapturedCall, name: str) -> None:
        self._inner, self._call, self._name = inner, call, name

    def decode(self, chunk: bytes, *, last: bool = False) -> bytes:
        inner = self._inner
        if inner is None:
            return b""
        try:
            return _bytes(inner.flush() if last else inner.decode(chunk))
        except Exception as exc:
            self.fail(exc)
            return b""

    def fail(self, exc: Exception) -> None:
        self._inner = None
        self._call.undecodable(
            f"the body cannot be decoded (Content-Encoding: {self._name}): "
            f"{type(exc).__name__}: {exc}"
        )


class _Chain:
    """The codings of a Content-Encoding undone last first, those the module knows (for an
    HTTP module without the response's own `_get_content_decoder`)."""

    def __init__(self, decoders: list[Any]) -> None:
        self._decoders = decoders

    def decode(self, data: bytes) -> bytes:
        for decoder in self._decoders:
            data = _bytes(decoder.decode(data))
        return data

    def flush(self) -> bytes:
        data = b""
        for decoder in self._decoders:
            data = _bytes(decoder.decode(data)) + _bytes(decoder.flush())
        return data


def _chain(module: ModuleType, encoding: str) -> _Chain:
    known = getattr(getattr(module, "_decoders", None), "SUPPORTED_DECODERS", {})
    codings = [c.strip().lower() for c in encoding.split(",")]
    return _Chain([known[c]() for c in reversed(codings) if c in known and c != "identity"])


def _bytes(data: Any) -> bytes:
    return data if isinstance(data, bytes) else b"".join(data)


def _feed(
    call: CapturedCall, decoder: _Decoder | None, chunk: bytes, *, last: bool = False
) -> None:
    """Show the call a chunk of the body as the caller will read it (`last`: the body is
    over). Capture never changes what the caller gets: its own failure is the trial's error."""
    if call.done:
        return
    try:
        if decoder is not None:
            chunk = decoder.decode(chunk, last=last)
        if chunk:
            call.feed(chunk)
    except Exception as exc:
        call.lost(exc)


class _Streams:
    """The byte-stream classes of one HTTP module: tees of live answers, replayed answers."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.sync_tee, self.async_tee = _tee_classes(module)
        self.sync_replay, self.async_replay = _replay_classes(module)

    def tee(self, inner: Any, call: CapturedCall, decoder: _Decoder | None, *, sync: bool) -> Any:
        return (self.sync_tee if sync else self.async_tee)(inner, call, decoder)

    def decoder(self, response: Any, call: CapturedCall) -> _Decoder | None:
        """What undoes the response's content encoding (`gzip`, `deflate, gzip`, `br`...) as
        its caller will: `None` when it has none. The module's own decoder for the same
        headers sees the same bytes as the caller's, codings it does not know and all."""
        values = response.headers.get_list("content-encoding")
        name = ", ".join(values)
        if all(v.strip().lower() == "identity" for v in name.split(",") if v.strip()):
            return None
        probe = self.module.Response(200, headers=[("content-encoding", v) for v in values])
        make = getattr(probe, "_get_content_decoder", None)
        try:
            inner = make() if make is not None else _chain(self.module, name)
        except Exception as exc:  # the caller's read fails the same way (too many codings)
            decoder = _Decoder(None, call, name)
            decoder.fail(exc)
            return decoder
        return _Decoder(inner, call, name)

    def replay(self, request: Any, answer: dict[str, Any], *, sync: bool) -> Any:
        """A response made from a recorded answer; no connection is opened."""
        if "events" in answer:
            chunks = [event.encode("utf-8") for event in answer["events"]]
            content_type = SSE
        elif "json" in answer:
            chunks = [json.dumps(answer["json"], ensure_ascii=False).encode("utf-8")]
            content_type = answer.get("content_type") or "application/json"
        else:
            chunks = [str(answer.get("text", "")).encode("utf-8")]
            content_type = answer.get("content_type") or "text/plain"
        stream = (self.sync_replay if sync else self.async_replay)(chunks)
        headers = [("content-type", content_type)]
        if answer.get("refused"):
            headers.append(("x-should-retry", "false"))
        response = self.module.Response(
            status_code=int(answer.get("status") or 200),
            headers=headers,
            stream=stream,
            request=request,
        )
        response.elapsed = datetime.timedelta(0)
        return response


def _tee_classes(module: ModuleType) -> tuple[type, type]:
    class SyncTee(module.SyncByteStream):  # type: ignore[misc, name-defined]
        """The live answer's bytes, passed on as they come and shown to the call."""

        def __init__(self, inner: Any, call: CapturedCall, decoder: _Decoder | None) -> None:
            self._inner, self._call, self._decoder = inner, call, decoder

        @property
        def elapsed(self) -> Any:  # httpx2 reads the response's time from its stream
            return getattr(self._inner, "elapsed", None)

        def __iter__(self) -> Iterator[bytes]:
            try:
                for chunk in self._inner:
                    _feed(self._call, self._decoder, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                self._call.broke(exc)
                raise
            _feed(self._call, self._decoder, b"", last=True)
            self._call.finish(ended=True)

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._call.finish(ended=False)

    class AsyncTee(module.AsyncByteStream):  # type: ignore[misc, name-defined]
        """`SyncTee` for async clients (`finish_at_close`: the call is finished at `aclose`)."""

        def __init__(self, inner: Any, call: CapturedCall, decoder: _Decoder | None) -> None:
            self._inner, self._call, self._decoder = inner, call, decoder
            self._at_close = _finish_at_close.get()
            self._ended = False

        @property
        def elapsed(self) -> Any:
            return getattr(self._inner, "elapsed", None)

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self._inner:
                    _feed(self._call, self._decoder, chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as exc:
                self._call.broke(exc)
                raise
            _feed(self._call, self._decoder, b"", last=True)
            if self._at_close:
                self._ended = True
            else:
                self._call.finish(ended=True)

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._call.finish(ended=self._ended)

    return SyncTee, AsyncTee


def _replay_classes(module: ModuleType) -> tuple[type, type]:
    class SyncReplay(module.SyncByteStream):  # type: ignore[misc, name-defined]
        """A recorded answer's bytes, chunk by chunk (one SSE event a chunk)."""

        elapsed = datetime.timedelta(0)

        def __init__(self, chunks: list[bytes]) -> None:
            self._chunks = chunks

        def __iter__(self) -> Iterator[bytes]:
            yield from self._chunks

        def close(self) -> None:
            pass

    class AsyncReplay(module.AsyncByteStream):  # type: ignore[misc, name-defined]
        """`SyncReplay` for async clients."""

        elapsed = datetime.timedelta(0)

        def __init__(self, chunks: list[bytes]) -> None:
            self._chunks = chunks

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in self._chunks:
                yield chunk

        async def aclose(self) -> None:
            pass

    return SyncReplay, AsyncReplay
