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

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from trialkit.capture import wire
from trialkit.capture._events import EventTexts
from trialkit.capture._joined import join_split_values
from trialkit.capture.faults import ModelFault, StreamCut, answer_problem, fault, status_line
from trialkit.capture.scope import Scope
from trialkit.models.base import ModelResponse, key_of
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.models.context import CallRole
from trialkit.models.pricing import cost_of
from trialkit.secrets import redact, redact_data
from trialkit.transcript import Message, ModelCall, TranscriptRecorder

KEY_VERSION = 1
TRANSIENT = frozenset({408, 409, 429})
"""With 5xx: answers an SDK retries. Such an attempt is not recorded; the attempt that
follows takes its place (and its occurrence), and the call counts it as a retry."""
SSE = "text/event-stream"

__all__ = ["KEY_VERSION", "SSE", "CapturedCall", "ModelFault", "StreamCut", "flush_held"]


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
        self._body: list[bytes] = []
        """A whole answer's body as it came (a stream is read as it comes, not kept)."""
        self._status = 0
        self._content_type = ""
        self._assembler: wire.StreamAssembler | None = None
        self._events: EventTexts | None = None
        """A stream's event texts, kept only to record them."""
        self._undecodable: str | None = None

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
            cassette = self.cassette
            if cassette is not None and cassette.mode in (CacheMode.RECORD, CacheMode.AUTO):
                self._events = EventTexts()

    def feed(self, chunk: bytes) -> None:
        """A piece of the (decoded) body, as the caller receives it. A stream is assembled
        as it comes (its events' texts kept only when they are to be recorded)."""
        if self._assembler is None:
            self._body.append(chunk)
            return
        self._assembler.feed(chunk)
        if self._events is not None:
            self._events.feed(chunk)

    def undecodable(self, problem: str) -> None:
        """The body's content encoding could not be undone (what the caller reads fails the
        same way): nothing more is fed, and the call has no usable answer."""
        if self._undecodable is None:
            self._undecodable = problem

    def finish(self, *, ended: bool) -> None:
        """The body is over: `ended` when it was read to its end, not when the caller closed
        it early. An answer that is no use to the agent (see `trialkit.capture.faults`) is a
        fault of the call: the trial's error unless its task allows them."""
        if self.done:
            return
        self.done = True
        try:
            self._finish(ended)
        except Exception as exc:
            self.lost(exc)

    def lost(self, exc: Exception) -> None:
        """Capture itself failed to read the answer: the caller still gets it as it came, and
        the trial is an error, since its transcript lacks the call."""
        self.done = True
        self._fail(
            RuntimeError(
                f"trialkit could not capture the answer of {self.endpoint}: "
                f"{type(exc).__name__}: {exc}"
            )
        )

    def _finish(self, ended: bool) -> None:
        answer: dict[str, Any] = {"status": self._status, "content_type": self._content_type}
        if self._undecodable is not None:
            self._note(answer, replayed=False, problem=(self._undecodable, False))
            return
        if self._assembler is not None:
            answer["content_type"] = SSE
            answer["events"] = self._events.events if self._events is not None else []
        else:
            body = b"".join(self._body)
            self._body = []
            try:
                answer["json"] = json.loads(body)
            except ValueError:
                answer["text"] = body.decode("utf-8", "replace")
        if self._retried(answer):
            return
        cut = self._note(answer, replayed=False, assembled=self._assembler, ended=ended)
        self._assembler = self._events = None  # a long answer's parts: not kept past the call
        if not cut:
            self._record(answer)

    def refused(self, exc: BaseException) -> None:
        """The request was never sent (`--offline`): a failed call in the transcript."""
        self.done = True
        self._note(None, replayed=False, error=exc)

    def broke(self, exc: BaseException) -> None:
        """The request or its answer's body failed (a connection error, a timeout, a
        cancellation). A cancelled read is the caller giving up, as if it closed the stream;
        anything else is no usable answer (held first when no answer came: the SDK may retry
        it)."""
        if self.done:
            return
        if not isinstance(exc, Exception) and self._status:
            self.finish(ended=False)
            return
        self.done = True
        try:
            if self._status == 0:
                self._hold(f"{type(exc).__name__}: {exc}", None, fault=isinstance(exc, Exception))
            else:
                problem = f"the answer broke off: {type(exc).__name__}: {exc}"
                self._note(None, replayed=False, problem=(problem, True))
        except Exception as error:
            self.lost(error)

    # -- what is kept ------------------------------------------------------------------------

    def _retried(self, answer: dict[str, Any]) -> bool:
        """Hold back a transient failure (the SDK will retry it): `True` when held."""
        if not (self._status in TRANSIENT or self._status >= 500):
            return False
        message = wire.error_message(answer.get("json", answer.get("text")))
        self._hold(message or "an error status, and no message", self._status)
        return True

    def _hold(self, error: str, status: int | None, *, fault: bool = True) -> None:
        recorder = self.scope.recorder
        recorder.release_occurrence(self.key, self.occurrence)
        held = _Held(
            self.model_id,
            self.key,
            self.endpoint,
            error,
            status,
            self.started,
            self.scope.role if fault else None,
        )
        recorder.held_attempts.setdefault(self.key, []).append(held)

    def _note(
        self,
        answer: dict[str, Any] | None,
        *,
        replayed: bool,
        error: BaseException | None = None,
        assembled: wire.StreamAssembler | None = None,
        ended: bool = True,
        problem: tuple[str, bool] | None = None,
    ) -> bool:
        """Add the call to the trial's transcript (`assembled`: a live stream, read already)
        and note a fault when it got no usable answer (`problem`: one found already, with
        whether the stream was cut). `True` when the answer was cut short."""
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
        if answer is not None and problem is None:
            call.status = answer.get("status")
            stream = assembled if assembled is not None else _stream_of(self.api, answer)
            problem = answer_problem(
                self.api,
                answer,
                asked_stream=self.streamed,
                stream=stream,
                ended=ended and not replayed,
            )
            try:
                response = stream.result() if stream else _response_of(self.api, answer)
            except wire.WireError as exc:
                problem = problem or (str(exc), False)
            else:
                call.response = redact_data(response.model_dump(mode="json"))
                call.usage = response.usage
                call.cost_usd = cost_of(self.model_id, response.usage)
                if self.scope.role == "agent":
                    _add_tools_and_reasoning(recorder, response)
        elif answer is not None:
            call.status = answer.get("status")
        else:
            call.status = self._status or None
        if problem is not None:
            text, cut = problem
            call.error = redact(f"{status_line(call.status, len(held))}: {text}")
            _blame(
                recorder, self.scope.role, fault(self.model_id, self.endpoint, call.error, cut=cut)
            )
        if error is not None:
            call.error = redact(str(error))
            if answer is None and self._status == 0:
                call.cost_usd = 0.0  # no answer came: nothing was billed
        recorder.add_model_call(call)
        return problem is not None and problem[1]

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
    """When the agent is done (and again at the end of a trial): attempts that failed and
    were never retried become failed calls in the transcript, and faults of the trial (a 500
    after the SDK's retries, a connection that never answered)."""
    held = list(recorder.held_attempts.values())
    recorder.held_attempts.clear()
    for attempts in held:
        last: _Held = attempts[-1]
        retries = len(attempts) - 1
        error = redact(f"{status_line(last.status, retries)}: {last.error}")
        recorder.add_model_call(
            ModelCall(
                model=last.model_id,
                role=last.role or "agent",
                key=last.key,
                endpoint=last.endpoint,
                status=last.status,
                retries=retries,
                error=error,
                cost_usd=0.0,  # no answer came: nothing was billed
                latency_s=time.perf_counter() - attempts[0].started,
            )
        )
        if last.role is not None:
            _blame(recorder, last.role, fault(last.model_id, last.endpoint, error))


def _blame(recorder: TranscriptRecorder, role: str, exc: ModelFault) -> None:
    """A grader's call without a usable answer makes the trial an error, always; the agent's
    is a fault the trial's task may allow."""
    if role == "grader":
        recorder.fail(exc)
    else:
        recorder.fault(exc)


@dataclass(frozen=True, slots=True)
class _Held:
    """An attempt that failed in a way the SDK retries."""

    model_id: str
    key: str
    endpoint: str
    error: str
    status: int | None
    started: float
    role: CallRole | None
    """Whose call it was; `None` when its failure is no fault (the caller cancelled it)."""


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


def _stream_of(api: wire.Api, answer: dict[str, Any]) -> wire.StreamAssembler | None:
    """A recorded stream's events, read again; `None` for an answer not streamed."""
    if "events" not in answer:
        return None
    assembler = wire.StreamAssembler(api)
    for event in answer["events"]:
        assembler.feed(event.encode("utf-8"))
    return assembler


def _response_of(api: wire.Api, answer: dict[str, Any]) -> ModelResponse:
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
