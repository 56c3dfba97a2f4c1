"""Captured model calls that got no usable answer, and what was wrong, in one line.

An agent may catch the SDK's exception (or the `AttributeError` of a reply it could not read)
and answer anyway; its trial must not pass on that. So every captured call's answer is judged
here as the SDK would take it: an error status (4xx or 5xx, the last after the SDK's retries),
no answer at all, a body that is not the API's JSON, a stream that reports an error, holds an
event that is not JSON, not UTF-8 or not of the API's shape, or ends before its final event,
a stream where none was asked for or none where one was. Such a call is a `ModelFault`: the
trial is an error naming the call, its status and the problem, unless its task allows model
faults (`Task(model_faults="allow")`, for agents whose job is to survive them); either way the
call is in the transcript with its `error`.
"""

from __future__ import annotations

from typing import Any

from trialkit.capture import wire


class ModelFault(ConnectionError):
    """A captured model call that got no usable answer (a trial error unless the task allows
    model faults)."""


class StreamCut(ModelFault):
    """The server ended a streamed answer before its final event, or it broke off."""


def fault(model_id: str, endpoint: str, problem: str, *, cut: bool = False) -> ModelFault:
    """The trial's error for a call to `endpoint` whose answer had `problem` (which starts with
    the status: `HTTP 401: invalid API key`)."""
    kind = StreamCut if cut else ModelFault
    return kind(f"{model_id}: no usable answer from {endpoint}: {problem}")


def status_line(status: int | None, retries: int = 0) -> str:
    """`HTTP 500`, `HTTP 500 after 2 retries`, `no response`."""
    head = f"HTTP {status}" if status else "no response"
    if retries:
        head += f" after {retries} {'retry' if retries == 1 else 'retries'}"
    return head


def answer_problem(
    api: wire.Api,
    answer: dict[str, Any],
    *,
    asked_stream: bool,
    stream: wire.StreamAssembler | None,
    ended: bool,
) -> tuple[str, bool] | None:
    """What makes `answer` (`status`, `content_type`, and `json` or `text`; `stream` holds
    what an event stream's events added up to) no usable answer, with whether the stream was
    cut short; `None` for a usable one. `ended`: the body was read to its end (a stream the
    caller closed early is judged on what it read, and so is a recorded one: it was recorded
    as its caller read it, and the cassette refuses recordings of cut streams)."""
    status = int(answer.get("status") or 200)
    if status >= 400:
        data = answer.get("json", answer.get("text"))
        return wire.error_message(data) or "an error status, and no message", False
    if stream is not None:
        return _stream_problem(stream, asked_stream=asked_stream, ended=ended)
    content_type = answer.get("content_type") or "no content type"
    if asked_stream:
        return (
            f"a stream was asked for (stream: true), and the answer is {content_type}, "
            "not an event stream"
        ), False
    if "json" not in answer:
        text = str(answer.get("text") or "")
        if not text.strip():
            return "the body is empty", False
        start = " ".join(text.split())[:80]
        return f"the body is not JSON ({content_type}: {start!r})", False
    if not 200 <= status < 300:
        return "not an answer (a status that is no success)", False
    data = answer["json"]
    if api == "responses" and isinstance(data, dict) and data.get("status") == "failed":
        return f"the response failed: {wire.error_message(data) or 'no message'}", False
    return None


def _stream_problem(
    stream: wire.StreamAssembler, *, asked_stream: bool, ended: bool
) -> tuple[str, bool] | None:
    if not asked_stream:
        return "an event stream, and the request asked for no stream", False
    if stream.error is not None:
        return f"the stream reported an error: {stream.error}", False
    if stream.malformed:
        count = stream.malformed
        events = "an event" if count == 1 else f"{count} events"
        return f"{events} of the stream not JSON (the first: {stream.first_malformed!r})", False
    if stream.not_utf8:
        return "the stream is not UTF-8", False
    if stream.odd is not None:
        return f"an event not of the API's shape: {stream.odd}", False
    if ended and not stream.complete:  # a finish reason ends the answer where some servers
        # send no final marker (chat without `[DONE]`, LiteLLM's Messages without `message_stop`)
        return (
            f"the server ended the streamed answer before its final event (after "
            f"{stream.events} events)",
            True,
        )
    if stream.terminated and stream.events == 0:
        return "the stream holds no events", False
    return None
