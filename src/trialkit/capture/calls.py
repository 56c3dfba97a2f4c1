"""One model call the agent made with its own SDK client, from its request to the transcript.

The hook (`trialkit.capture.hook`) makes a `CapturedCall` for each recognised model request in
a trial. The call works out the request's cassette key and occurrence, answers from the cassette
when the run replays, and otherwise watches the live answer go by (`feed`, then `finish`), so
that the trial's transcript gets a `ModelCall` (request, assembled answer, usage, cost, status,
retries) and, when recording, the cassette gets the answer exactly as it came over the wire.

Per-trial values (the trial's workspace path) are written as placeholders in keys and
recordings and put back in replayed answers, so a replay in a new folder still matches.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from trialkit.capture import wire
from trialkit.capture._joined import join_split_values
from trialkit.capture.scope import Scope
from trialkit.models.base import ModelResponse, key_of
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.models.pricing import cost_of
from trialkit.secrets import redact, redact_data
from trialkit.transcript import Message, ModelCall, TranscriptRecorder

KEY_VERSION = 1
TRANSIENT = frozenset({408, 409, 429})
"""With 5xx: answers an SDK retries. Such an attempt is not recorded; the attempt that
follows takes its place (and its occurrence), and the call counts it as a retry."""
SSE = "text/event-stream"


class StreamCut(ConnectionError):
    """The server ended a streamed answer before its final event (a trial error)."""


class CapturedCall:
    """A recognised model request of a trial, and what became of it."""

    def __init__(
        self, scope: Scope, api: wire.Api, method: str, url: str, body: dict[str, Any]
    ) -> None:
        self.scope = scope
        self.api = api
        self.endpoint = f"{method} {url}"
        self.model_id = f"{wire.provider_of(api)}/{wire.model_of(body)}"
        recorder = scope.recorder
        subs = recorder.substitutions
        keyed = wire.key_body(api, _swap(body, subs, to_placeholder=True) if subs else body)
        if recorder.volatile:
            keyed = _blank_volatile(keyed, recorder.volatile)
        self.request = {
            "schema_version": KEY_VERSION,
            "api": api,
            "model": self.model_id,
            "body": keyed,
        }
        self.key = key_of(self.request)
        if scope.role == "agent":
            _pair_tool_results(recorder, api, body)
        self.trial = recorder.trial_index
        self.occurrence = recorder.next_occurrence(self.key)
        self.streamed = wire.wants_stream(body)
        self.started = time.perf_counter()
        self.done = False
        self._chunks: list[bytes] = []
        self._status = 0
        self._content_type = ""
        self._assembler: wire.StreamAssembler | None = None

    # -- replay ------------------------------------------------------------------------------

    @property
    def cassette(self) -> Cassette | None:
        return self.scope.settings.cassette

    def replayed(self) -> dict[str, Any] | None:
        """The recorded answer for this call in REPLAY and AUTO (its ModelCall noted); `None`
        when the call must go to the model; `CassetteMiss` in REPLAY without a recording."""
        cassette = self.cassette
        if cassette is None or cassette.mode not in (CacheMode.REPLAY, CacheMode.AUTO):
            return None
        answer = cassette.lookup_http(
            self.model_id, self.key, trial=self.trial, occurrence=self.occurrence
        )
        if answer is not None:
            subs = self.scope.recorder.substitutions
            answer = _swap(answer, subs, to_placeholder=False) if subs else answer
            self._note(answer, replayed=True)
            return answer
        if cassette.mode is CacheMode.AUTO:
            return None
        miss = cassette.miss_http(
            self.model_id,
            self.request,
            endpoint=self.endpoint,
            task_id=self.scope.recorder.task_id,
            trial=self.trial,
            occurrence=self.occurrence,
        )
        self._note(None, replayed=False, error=miss)
        self._fail(miss)
        raise miss

    # -- a live answer -----------------------------------------------------------------------

    def begin(self, status: int, content_type: str) -> None:
        """The live answer's status and content type, before its body."""
        self._status = status
        self._content_type = content_type.split(";")[0].strip().lower()
        if self._content_type == SSE:
            self._assembler = wire.StreamAssembler(self.api)

    def feed(self, chunk: bytes) -> None:
        """A piece of the (decoded) body, as the caller receives it."""
        self._chunks.append(chunk)
        if self._assembler is not None:
            self._assembler.feed(chunk)

    def finish(self, *, ended: bool) -> None:
        """The body is over: `ended` when it was read to its end, not when the caller closed
        it early. A stream the server ended before its final event fails the trial."""
        if self.done:
            return
        self.done = True
        body = b"".join(self._chunks)
        if self._assembler is not None:
            text = body.decode("utf-8", "replace").replace("\r\n", "\n")
            answer: dict[str, Any] = {
                "status": self._status,
                "content_type": SSE,
                "events": [event + "\n\n" for event in text.split("\n\n") if event.strip()],
            }
            if ended and not self._assembler.complete and self._assembler.error is None:
                cut = StreamCut(
                    f"{self.model_id}: the server ended the streamed answer at {self.endpoint} "
                    f"before its final event (after {self._assembler.events} events): the "
                    "answer is incomplete"
                )
                self._note(answer, replayed=False, error=cut)
                self._fail(cut)
                return
        else:
            answer = {"status": self._status, "content_type": self._content_type}
            try:
                answer["json"] = json.loads(body)
            except ValueError:
                answer["text"] = body.decode("utf-8", "replace")
        if self._retried():
            return
        self._note(answer, replayed=False, assembled=self._read_as_recorded(ended, body))
        self._record(answer)

    def _read_as_recorded(self, ended: bool, body: bytes) -> wire.StreamAssembler | None:
        """The live stream's assembler, when what it read is what reading the recorded events
        again gives (a whole stream, its lines ended by LF alone): the transcript then needs no
        second parse of every event. `None` otherwise, or for an answer not streamed."""
        assembler = self._assembler
        if assembler is None or not (ended and assembler.complete) or b"\r" in body:
            return None
        return assembler

    def refused(self, exc: BaseException) -> None:
        """The request was never sent (`--offline`): a failed call in the transcript."""
        self.done = True
        self._note(None, replayed=False, error=exc)

    def broke(self, exc: BaseException) -> None:
        """The request or its answer's body failed (a connection error, a timeout)."""
        if self.done:
            return
        self.done = True
        if self._status == 0:  # no answer at all: the SDK may retry it
            self._hold(f"{type(exc).__name__}: {exc}", None)
            return
        error = StreamCut(
            f"{self.model_id}: the answer at {self.endpoint} broke off: {type(exc).__name__}: {exc}"
        )
        self._note(None, replayed=False, error=error)
        self._fail(error)

    # -- what is kept ------------------------------------------------------------------------

    def _retried(self) -> bool:
        """Hold back a transient failure (the SDK will retry it): `True` when held."""
        if not (self._status in TRANSIENT or self._status >= 500):
            return False
        data = None
        with contextlib.suppress(ValueError):
            data = json.loads(b"".join(self._chunks))
        self._hold(wire.error_text(self.api, self._status, data), self._status)
        return True

    def _hold(self, error: str, status: int | None) -> None:
        recorder = self.scope.recorder
        recorder.release_occurrence(self.key, self.occurrence)
        held = _Held(self.model_id, self.key, self.endpoint, error, status, self.started)
        recorder.held_attempts.setdefault(self.key, []).append(held)

    def _note(
        self,
        answer: dict[str, Any] | None,
        *,
        replayed: bool,
        error: BaseException | None = None,
        assembled: wire.StreamAssembler | None = None,
    ) -> None:
        """Add the call to the trial's transcript (`assembled`: the answer, read already)."""
        recorder = self.scope.recorder
        held = recorder.held_attempts.pop(self.key, [])
        started = held[0].started if held else self.started
        call = ModelCall(
            model=self.model_id,
            role=self.scope.role,
            request=redact_data(self.request["body"]),
            key=self.key,
            endpoint=self.endpoint,
            replayed=replayed,
            retries=len(held),
            latency_s=0.0 if replayed else time.perf_counter() - started,
        )
        if answer is not None:
            call.status = answer.get("status")
            try:
                response = assembled.result() if assembled else _response_of(self.api, answer)
            except wire.WireError as exc:
                call.error = redact(f"{self.model_id}: an answer the API does not give: {exc}")
            else:
                call.response = redact_data(response.model_dump(mode="json"))
                call.usage = response.usage
                call.cost_usd = cost_of(self.model_id, response.usage)
                if self.scope.role == "agent":
                    _add_tools_and_reasoning(recorder, response)
                if call.status is not None and call.status >= 400:
                    call.error = redact(wire.error_text(self.api, call.status, answer.get("json")))
        if error is not None:
            call.error = redact(str(error))
            if answer is None and self._status == 0:
                call.cost_usd = 0.0  # no answer came: nothing was billed
        recorder.add_model_call(call)

    def _record(self, answer: dict[str, Any]) -> None:
        cassette = self.cassette
        if cassette is None or cassette.mode not in (CacheMode.RECORD, CacheMode.AUTO):
            return
        subs = self.scope.recorder.substitutions
        kept = answer
        if subs:
            if "events" in answer:  # a value split across deltas is in no one event
                values = [real for real, _ in subs]
                kept = {**answer, "events": join_split_values(self.api, answer["events"], values)}
            kept = _swap(kept, subs, to_placeholder=True)
        try:
            cassette.record_http(
                self.model_id, self.request, kept, trial=self.trial, occurrence=self.occurrence
            )
        except Exception as exc:  # a secret refused, a full disk: the trial cannot be replayed
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.scope.recorder.fail(exc)


def flush_held(recorder: TranscriptRecorder) -> None:
    """At the end of a trial: attempts that failed and were never retried become failed
    calls in the transcript."""
    for attempts in list(recorder.held_attempts.values()):
        last: _Held = attempts[-1]
        recorder.add_model_call(
            ModelCall(
                model=last.model_id,
                key=last.key,
                endpoint=last.endpoint,
                status=last.status,
                retries=len(attempts) - 1,
                error=redact(last.error),
                cost_usd=0.0,  # no answer came: nothing was billed
                latency_s=time.perf_counter() - attempts[0].started,
            )
        )
    recorder.held_attempts.clear()


@dataclass(frozen=True, slots=True)
class _Held:
    """An attempt that failed in a way the SDK retries."""

    model_id: str
    key: str
    endpoint: str
    error: str
    status: int | None
    started: float


def _add_tools_and_reasoning(recorder: TranscriptRecorder, response: ModelResponse) -> None:
    """The tool calls the model asked for (their results come with a later request) and the
    reasoning it showed: the transcript of an unmodified agent has them too."""
    for tool_call in response.tool_calls:
        if recorder.transcript.tool_call(tool_call.id) is None:
            recorder.add_tool_call(tool_call.model_copy(update={"started_at": recorder.elapsed()}))
    for thought in response.reasoning:
        recorder.add_reasoning(thought)


def _pair_tool_results(recorder: TranscriptRecorder, api: wire.Api, body: dict[str, Any]) -> None:
    """Tool results the agent sends back to the model, paired with the calls they answer."""
    for call_id, result, is_error in _tool_results(api, body):
        known = recorder.transcript.tool_call(call_id)
        if known is not None and known.result is None:
            known.result = redact(result)
            known.is_error = is_error
            if known.started_at is not None:
                known.duration_s = max(0.0, recorder.elapsed() - known.started_at)


def _tool_results(api: wire.Api, body: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    if api == "chat":
        for message in body.get("messages") or ():
            if isinstance(message, dict) and message.get("role") == "tool":
                call_id = message.get("tool_call_id")
                if isinstance(call_id, str):
                    yield call_id, _text_of(message.get("content")), False
    elif api == "responses":
        items = body.get("input")
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output"):
                call_id = item.get("call_id")
                if isinstance(call_id, str):
                    yield call_id, _text_of(item.get("output")), False
    elif api == "messages":
        for message in body.get("messages") or ():
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    call_id = block.get("tool_use_id")
                    if isinstance(call_id, str):
                        is_error = block.get("is_error") is True
                        yield call_id, _text_of(block.get("content")), is_error


def _text_of(content: Any) -> str:
    """A tool result's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _response_of(api: wire.Api, answer: dict[str, Any]) -> ModelResponse:
    if "events" in answer:
        assembler = wire.StreamAssembler(api)
        for event in answer["events"]:
            assembler.feed(event.encode("utf-8"))
        return assembler.result()
    status = answer.get("status") or 200
    data = answer.get("json")
    if status >= 400 or data is None:
        return ModelResponse(message=Message(role="assistant"))
    return wire.parse_json(api, data)


def _blank_volatile(value: Any, patterns: list[tuple[re.Pattern[str], str]]) -> Any:
    """`value` with each text that changes from run to run (a duration an agent prints in a
    tool's output) written as its stand-in: for the key only, nothing is put back."""
    if isinstance(value, str):
        for pattern, stand_in in patterns:
            value = pattern.sub(stand_in, value)
        return value
    if isinstance(value, dict):
        return {k: _blank_volatile(v, patterns) for k, v in value.items()}
    if isinstance(value, list):
        return [_blank_volatile(item, patterns) for item in value]
    return value


def _swap(value: Any, subs: list[tuple[str, str]], *, to_placeholder: bool) -> Any:
    """`value` with each per-trial value written as its placeholder (or back)."""
    if isinstance(value, str):
        for real, placeholder in subs:
            old, new = (real, placeholder) if to_placeholder else (placeholder, real)
            if old in value:
                value = value.replace(old, new)
            escaped_old, escaped_new = json.dumps(old)[1:-1], json.dumps(new)[1:-1]
            if escaped_old != old and escaped_old in value:  # inside JSON text (SSE events)
                value = value.replace(escaped_old, escaped_new)
        return value
    if isinstance(value, dict):
        return {k: _swap(v, subs, to_placeholder=to_placeholder) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(item, subs, to_placeholder=to_placeholder) for item in value]
    return value
