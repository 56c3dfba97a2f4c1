"""A captured call's recorded answer (`kind: "http"`): what makes one fit to replay.

The capture hook replays an answer as the bytes of the response the agent's SDK reads, and
reads it again for the transcript. An answer that says less than it seems to is refused rather
than replayed: a field of the wrong type (which would break the replay with a raw error), and
above all a stream that ends before its API's final event, which an SDK reads as a whole answer
without a word. A stream the agent itself closed early is recorded as far as it read, marked
`closed_early`, and replays as recorded.
"""

from __future__ import annotations

from typing import Any, Final

SSE: Final = "text/event-stream"
BODIES: Final = ("json", "events", "text")
FIELDS: Final = frozenset({"status", "content_type", *BODIES, "closed_early"})
FINAL_EVENTS: Final[dict[str, str]] = {
    "chat": "`data: [DONE]` or a chunk with a finish_reason",
    "responses": "`response.completed` or `response.incomplete`",
    "messages": "`message_stop`",
}
"""What ends a stream of each streamed API (an error event ends one too)."""


def replay_problem(api: object, answer: object) -> str | None:
    """What makes `answer`, a recorded answer to a call of `api`, unfit to replay; None when it
    is fit. One problem, the first found, in a few words."""
    if not isinstance(answer, dict):
        return "the answer is not an object"
    extra = sorted(str(name) for name in answer if name not in FIELDS)
    if extra:
        return f"unknown field {extra[0]!r} in the answer (it has {', '.join(sorted(FIELDS))})"
    status = answer.get("status")
    if type(status) is not int or not 200 <= status <= 599:
        return f"status {status!r} is not an HTTP status"
    content_type = answer.get("content_type")
    if not isinstance(content_type, str):
        return f"content_type {content_type!r} is not a media type"
    bodies = [name for name in BODIES if name in answer]
    if len(bodies) != 1:
        return f"needs exactly one of {', '.join(BODIES)}, has {bodies or 'none'}"
    closed = answer.get("closed_early", False)
    if type(closed) is not bool or (closed and bodies != ["events"]):
        return f"closed_early {closed!r}: it is true or false, for a streamed answer only"
    if bodies == ["text"] and not isinstance(answer["text"], str):
        return f"text must be a string, not {type(answer['text']).__name__}"
    if bodies == ["events"]:
        return _stream_problem(api, content_type, answer["events"], closed)
    return None


def _stream_problem(api: object, content_type: str, events: Any, closed: bool) -> str | None:
    if not isinstance(events, list) or not all(isinstance(event, str) for event in events):
        return "events must be a list of strings (one SSE event each)"
    if content_type != SSE:
        return f"a streamed answer is {SSE}, not {content_type!r}"
    if not isinstance(api, str) or api not in FINAL_EVENTS:
        return f"the request's api {api!r} has no streamed answers"
    for index, event in enumerate(events):
        if not event.endswith("\n\n"):
            return f"event {index} does not end with a blank line (\\n\\n)"
        try:
            event.encode("utf-8")
        except UnicodeEncodeError:
            return f"event {index} is not valid UTF-8 text"
    if closed or stream_ended(api, events):
        return None
    return (
        f"the recorded stream ends before its final event ({FINAL_EVENTS[api]}), after "
        f"{len(events)} event(s): it was cut short or edited, and would replay as a whole "
        "answer; delete the file and record again"
    )


def stream_ended(api: str, events: list[str]) -> bool:
    """Whether `events` (recorded events, each ending with a blank line) hold the stream's final
    event, or an error event, which ends a stream too. Searched from the end, an event at a
    time: the final event is usually the last."""
    from trialkit.capture.wire import StreamAssembler

    for event in reversed(events):
        alone = StreamAssembler(api)  # type: ignore[arg-type]
        alone.feed(event.encode("utf-8", "surrogatepass"))
        if alone.complete or alone.error is not None:
            return True
    return False
