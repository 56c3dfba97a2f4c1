"""A model call that got no usable answer makes its trial an error, whatever the agent did.

Every agent here calls the model through the official SDK, catches whatever that raises (an
`APIError`, the `AttributeError` of a reply it cannot read...) and answers "ok" anyway, which
its grader accepts. The fake server (`AnswerServer`, real HTTP on loopback) gives each kind of
broken answer; the trial must be an error that names the call (method and URL), its status and
what was wrong. With `model_faults="allow"` the same trials are graded (pass or fail), and the
calls are still in the transcript with their problem.
"""

from __future__ import annotations

import contextlib
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anthropic
import anyio
import openai
import pytest

from tests.capture.helpers import KEY, errors, run_trials
from tests.capture.sdk_calls import ANTHROPIC_MODEL, OPENAI_MODEL, body_of, events_of, good
from tests.fakes import provider_wire
from tests.fakes.answer_server import Answer, AnswerServer, Received
from tests.loaders._files import problems_of
from trialkit import Suite, Task, graders
from trialkit.loaders.suite_file import load_suite_file
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.task import SuiteError
from trialkit.trial import Trial

SSE = "text/event-stream"
FAST_RETRY = {"retry-after-ms": "1"}
"""Both SDKs honour it: a retried error costs a millisecond, not a backoff."""


@dataclass(frozen=True)
class Kind:
    """One kind of broken answer: what the server sends, and what the error must say."""

    name: str
    answer: Callable[[Received], Answer]
    says: str
    """In the trial's error, after `no usable answer from POST <url>: `."""
    stream: bool = False
    """The agent asks for a stream."""
    api: str = "chat"


def chat_error(status: int, message: str) -> Answer:
    body = provider_wire.openai_error(status, message, None, None)
    return Answer(json.dumps(body).encode(), status=status, headers=FAST_RETRY)


def anthropic_error(status: int, message: str) -> Answer:
    body = provider_wire.anthropic_error(status, message, None)
    return Answer(json.dumps(body).encode(), status=status, headers=FAST_RETRY)


def plain(body: bytes, content_type: str | None = "application/json") -> Callable[..., Answer]:
    return lambda received: Answer(body, content_type=content_type)


def whole_body(received: Received) -> bytes:
    return json.dumps(body_of(received)).encode()


def cut_short(end: str) -> Callable[[Received], Answer]:
    """A whole body that promises its full length and stops half-way."""

    def answer(received: Received) -> Answer:
        body = whole_body(received)
        return Answer(body[: len(body) // 2], length=len(body), end=end)  # type: ignore[arg-type]

    return answer


def corrupt_gzip(received: Received) -> Answer:
    body = whole_body(received)
    compressor = zlib.compressobj(wbits=31)
    damaged = compressor.compress(body[:40]) + compressor.flush(zlib.Z_SYNC_FLUSH) + b"\xff" * 8
    return Answer(damaged, headers={"content-encoding": "gzip"})


def stream_with(
    *extra: bytes, at: int = 1, keep: int | None = None, end: str = "clean"
) -> Callable[[Received], Answer]:
    """A well-formed stream with `extra` events put in at position `at`, then only the first
    `keep` events of it sent (all when `None`)."""

    def answer(received: Received) -> Answer:
        events = events_of(received)
        events = [*events[:at], *extra, *events[at:]]
        return Answer(
            stream=events if keep is None else events[:keep],
            content_type=SSE,
            end=end,  # type: ignore[arg-type]
        )

    return answer


def whole_json_to_a_stream(received: Received) -> Answer:
    return Answer(whole_body(received))


def stream_to_a_plain_request(received: Received) -> Answer:
    return Answer(stream=events_of(received), content_type=SSE)


def responses_stream(*events: dict[str, object]) -> Callable[[Received], Answer]:
    payload = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    return lambda received: Answer(stream=payload, content_type=SSE)


RESPONSE = {"id": "resp_1", "object": "response", "model": OPENAI_MODEL, "status": "in_progress"}
CREATED = {"type": "response.created", "sequence_number": 0, "response": RESPONSE}

OPENAI_KINDS = [
    Kind(
        "a 200 HTML page",
        plain(b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
        "HTTP 200: the body is not JSON (text/html: '<html><body><h1>502 Bad Gateway",
    ),
    Kind(
        "a JSON content type, a body that is not JSON",
        plain(b"upstream connect error"),
        "HTTP 200: the body is not JSON (application/json: 'upstream connect error')",
    ),
    Kind("an empty 200", plain(b""), "HTTP 200: the body is empty"),
    Kind(
        "choices that are no list",
        plain(b'{"id": "x", "choices": "nope"}'),
        "HTTP 200: not an OpenAI chat completion: choices",
    ),
    Kind(
        "no choices at all",
        plain(b'{"id": "x", "object": "chat.completion", "choices": []}'),
        "HTTP 200: not an OpenAI chat completion",
    ),
    Kind(
        "an error object with a 200",
        plain(b'{"error": {"message": "upstream overloaded", "type": "server_error"}}'),
        "HTTP 200: not an OpenAI chat completion",
    ),
    Kind(
        "a 500 after the SDK's retry",
        lambda r: chat_error(500, "The server had an error"),
        "HTTP 500 after 1 retry: The server had an error",
    ),
    Kind(
        "a 429 after the SDK's retry",
        lambda r: chat_error(429, "Rate limit reached"),
        "HTTP 429 after 1 retry: Rate limit reached",
    ),
    Kind("a 401", lambda r: chat_error(401, "Incorrect API key"), "HTTP 401: Incorrect API key"),
    Kind(
        "a 404", lambda r: chat_error(404, "The model does not exist"), "HTTP 404: The model does"
    ),
    Kind("a 400", lambda r: chat_error(400, "Bad request: messages"), "HTTP 400: Bad request"),
    Kind(
        "a body cut short by a reset",
        cut_short("reset"),
        "no response after 1 retry: ",
    ),
    Kind(
        "a body shorter than its Content-Length",
        cut_short("close"),
        "no response after 1 retry: RemoteProtocolError",
    ),
    Kind("corrupt gzip", corrupt_gzip, "no response after 1 retry: DecodingError"),
    Kind(
        "an event stream answering a request for none",
        stream_to_a_plain_request,
        "HTTP 200: an event stream, and the request asked for no stream",
    ),
    Kind(
        "a stream event that is not JSON",
        stream_with(b"data: {not json\n\n"),
        "HTTP 200: an event of the stream not JSON (the first: '{not json')",
        stream=True,
    ),
    Kind(
        "a stream event that is not UTF-8",
        stream_with(b'data: {"id": "x", "choices": [], "note": "\xff\xfe"}\n\n'),
        "HTTP 200: the stream is not UTF-8",
        stream=True,
    ),
    Kind(
        "an error event mid-stream",
        stream_with(b'data: {"error": {"message": "The model crashed"}}\n\n', at=2, keep=3),
        "HTTP 200: the stream reported an error: The model crashed",
        stream=True,
    ),
    Kind(
        "a stream chunk of the wrong shape",
        stream_with(b'data: {"id": "x", "choices": "nope"}\n\n'),
        "HTTP 200: an event not of the API's shape: a chunk: `choices` is a string 'nope'",
        stream=True,
    ),
    Kind(
        "a JSON answer to a stream request",
        whole_json_to_a_stream,
        "HTTP 200: a stream was asked for (stream: true), and the answer is application/json",
        stream=True,
    ),
    Kind(
        "a stream the server ends before its last event",
        stream_with(keep=3),
        "HTTP 200: the server ended the streamed answer before its final event (after 3 events)",
        stream=True,
    ),
    Kind(
        "a stream reset mid-way",
        stream_with(keep=3, end="reset"),
        "HTTP 200: the answer broke off: ",
        stream=True,
    ),
    Kind(
        "a stream that holds no event",
        lambda r: Answer(stream=[b": keep-alive\n\n", b"data: [DONE]\n\n"], content_type=SSE),
        "HTTP 200: the stream holds no events",
        stream=True,
    ),
    Kind(
        "a 500 to a stream request after the SDK's retry",
        lambda r: chat_error(500, "Overloaded"),
        "HTTP 500 after 1 retry: Overloaded",
        stream=True,
    ),
    Kind(
        "a Responses stream that fails",
        responses_stream(
            CREATED,
            {
                "type": "response.failed",
                "sequence_number": 1,
                "response": {**RESPONSE, "status": "failed", "error": {"message": "Boom"}},
            },
        ),
        "HTTP 200: the stream reported an error: Boom",
        stream=True,
        api="responses",
    ),
    Kind(
        "a Responses stream without response.completed",
        responses_stream(CREATED),
        "HTTP 200: the server ended the streamed answer before its final event (after 1 events)",
        stream=True,
        api="responses",
    ),
    Kind(
        "a Responses answer that failed",
        plain(
            b'{"id": "resp_1", "object": "response", "status": "failed", "output": [], '
            b'"error": {"code": "server_error", "message": "The model failed"}}'
        ),
        "HTTP 200: the response failed: The model failed",
        api="responses",
    ),
    Kind(
        "a Responses answer of the wrong shape",
        plain(b'{"id": "resp_1", "object": "response", "output": "nope"}'),
        "HTTP 200: not an OpenAI response: output",
        api="responses",
    ),
]


def anthropic_stream_without_stop(received: Received) -> Answer:
    return Answer(stream=events_of(received)[:-1], content_type=SSE)


ANTHROPIC_KINDS = [
    Kind(
        "a 200 HTML page",
        plain(b"<html>Bad gateway</html>", "text/html"),
        "HTTP 200: the body is not JSON (text/html",
        api="messages",
    ),
    Kind(
        "content that is no list",
        plain(b'{"type": "message", "content": "nope", "stop_reason": "end_turn"}'),
        "HTTP 200: not an Anthropic message: content",
        api="messages",
    ),
    Kind(
        "a 529 after the SDK's retry",
        lambda r: anthropic_error(529, "Overloaded"),
        "HTTP 529 after 1 retry: Overloaded",
        api="messages",
    ),
    Kind(
        "a 401",
        lambda r: anthropic_error(401, "invalid x-api-key"),
        "HTTP 401: invalid x-api-key",
        api="messages",
    ),
    Kind(
        "an error event mid-stream",
        stream_with(
            b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
            b'"message": "Overloaded"}}\n\n',
            at=3,
            keep=4,
        ),
        "HTTP 200: the stream reported an error: Overloaded",
        stream=True,
        api="messages",
    ),
    Kind(
        "a stream event that is not JSON",
        stream_with(b"event: content_block_delta\ndata: {oops\n\n", at=3),
        "HTTP 200: an event of the stream not JSON",
        stream=True,
        api="messages",
    ),
    Kind(
        "a JSON answer to a stream request",
        whole_json_to_a_stream,
        "HTTP 200: a stream was asked for (stream: true), and the answer is application/json",
        stream=True,
        api="messages",
    ),
]


def swallowing_agent(kind: Kind, server: AnswerServer) -> Callable[[str], str]:
    """Makes one call with one retry, catches whatever comes of it, and answers "ok"."""

    def agent(prompt: str) -> str:
        with contextlib.suppress(Exception):  # APIError, AttributeError, JSONDecodeError...
            call(kind, server, prompt)
        return "ok"

    return agent


def call(kind: Kind, server: AnswerServer, prompt: str) -> str:
    messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    if kind.api == "messages":
        with anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=1) as claude:
            if kind.stream:
                with claude.messages.create(
                    model=ANTHROPIC_MODEL, max_tokens=64, messages=messages, stream=True
                ) as events:
                    return str([e.type for e in events])
            message = claude.messages.create(
                model=ANTHROPIC_MODEL, max_tokens=64, messages=messages
            )
            return message.content[0].text  # type: ignore[union-attr]
    with openai.OpenAI(base_url=server.openai_base_url, api_key=KEY, max_retries=1) as client:
        if kind.api == "responses":
            if kind.stream:
                with client.responses.create(model=OPENAI_MODEL, input=prompt, stream=True) as s:
                    return str([e.type for e in s])
            return client.responses.create(model=OPENAI_MODEL, input=prompt).output_text
        if kind.stream:
            with client.chat.completions.create(
                model=OPENAI_MODEL, messages=messages, stream=True
            ) as chunks:
                return "".join(c.choices[0].delta.content or "" for c in chunks)
        reply = client.chat.completions.create(model=OPENAI_MODEL, messages=messages)
        return reply.choices[0].message.content or ""


def path_of(kind: Kind) -> str:
    return {"chat": "/v1/chat/completions", "responses": "/v1/responses"}.get(
        kind.api, "/v1/messages"
    )


def run_kind(kind: Kind, *, model_faults: str = "error", grader: str = "ok") -> tuple[Trial, str]:
    """The trial of an agent that swallows what `kind` does to its call, and the call's
    method and URL."""
    with AnswerServer(default=kind.answer) as server:
        task = Task(
            id="t",
            input="Hi",
            graders=[graders.contains(grader)],
            model_faults=model_faults,  # type: ignore[arg-type]
        )
        suite = Suite(id="faults", harness=swallowing_agent(kind, server), tasks=[task])
        _, trials, _ = run_trials(suite, timeout=30)
        endpoint = f"POST {server.url}{path_of(kind)}"
    (trial,) = trials
    return trial, endpoint


def assert_named(kind: Kind) -> None:
    trial, endpoint = run_kind(kind)
    assert trial.verdict == "error", f"{kind.name}: {trial.verdict}"
    assert trial.error is not None and trial.error.type in ("ModelFault", "StreamCut")
    expected = f"no usable answer from {endpoint}: {kind.says}"
    assert expected in trial.error.message, trial.error.message
    assert trial.outcome.output == "ok"  # the agent carried on: the error is capture's


@pytest.mark.parametrize("kind", OPENAI_KINDS, ids=[k.name for k in OPENAI_KINDS])
def test_an_openai_answer_the_agent_swallows_is_an_error_not_a_pass(kind: Kind) -> None:
    assert_named(kind)


@pytest.mark.parametrize("kind", ANTHROPIC_KINDS, ids=[k.name for k in ANTHROPIC_KINDS])
def test_an_anthropic_answer_the_agent_swallows_is_an_error_not_a_pass(kind: Kind) -> None:
    assert_named(kind)


WHOLE_WITHOUT_MARKER = [
    Kind(
        "a chat stream with a finish reason and no [DONE]",
        lambda r: Answer(stream=events_of(r)[:-1], content_type=SSE),
        "",
        stream=True,
    ),
    Kind(
        "a Messages stream with a stop reason and no message_stop (LiteLLM)",
        anthropic_stream_without_stop,
        "",
        stream=True,
        api="messages",
    ),
]


@pytest.mark.parametrize("kind", WHOLE_WITHOUT_MARKER, ids=[k.name for k in WHOLE_WITHOUT_MARKER])
def test_a_stream_whole_at_its_stop_reason_is_a_usable_answer(kind: Kind) -> None:
    """Some servers end a stream at its finish (stop) reason and send no final marker: the
    answer is whole, so the trial is graded. A stream cut before its finish reason is a fault
    ("a stream the server ends before its last event" above)."""
    trial, _ = run_kind(kind, grader="ok")
    assert trial.verdict == "pass", trial.error


def test_an_answer_that_came_after_a_retry_is_a_usable_answer() -> None:
    """A transient error the SDK retried past is no fault: the call that answered counts."""
    answers = [chat_error(503, "blip")]

    def answer(received: Received) -> Answer:
        return answers.pop(0) if answers else good(received)

    kind = Kind("retried", answer, "", api="chat")
    trial, _ = run_kind(kind)
    assert errors([trial]) == [] and trial.verdict == "pass"
    (model_call,) = trial.transcript.model_calls
    assert (model_call.retries, model_call.status, model_call.error) == (1, 200, None)


def kind_named(name: str, kinds: list[Kind] = OPENAI_KINDS) -> Kind:
    return next(kind for kind in kinds if kind.name == name)


ALLOWED = [
    kind_named("a 200 HTML page"),
    kind_named("a 500 after the SDK's retry"),
    kind_named("a body shorter than its Content-Length"),
    kind_named("an error event mid-stream"),
    kind_named("a stream the server ends before its last event"),
    kind_named("an error event mid-stream", ANTHROPIC_KINDS),
]


@pytest.mark.parametrize("kind", ALLOWED, ids=[k.name for k in ALLOWED])
def test_a_task_that_allows_model_faults_is_graded_and_keeps_the_problem(kind: Kind) -> None:
    passed, _ = run_kind(kind, model_faults="allow")
    assert errors([passed]) == [] and passed.verdict == "pass"
    problems = [c.error for c in passed.transcript.model_calls if c.error]
    assert problems and kind.says.split(": ", 1)[-1].split(" (")[0] in problems[-1]
    failed, _ = run_kind(kind, model_faults="allow", grader="paris")
    assert errors([failed]) == [] and failed.verdict == "fail"


def test_a_replayed_error_answer_is_a_fault_again(tmp_path: Path) -> None:
    """A recorded 401 replays as a 401: the trial is an error in the replay as it was live."""
    kind = kind_named("a 401")
    with AnswerServer(default=kind.answer) as server:
        task = Task(id="t", input="Hi", graders=[graders.contains("ok")])
        agent = swallowing_agent(kind, server)
        cassette = Cassette(tmp_path, CacheMode.RECORD)
        _, live, _ = run_trials(Suite(id="r", harness=agent, tasks=[task]), cassette=cassette)
        _, again, _ = run_trials(
            Suite(id="r", harness=agent, tasks=[task]), cassette=Cassette(tmp_path, "replay")
        )
        assert len(server.received) == 1
    for trial in (live[0], again[0]):
        assert trial.verdict == "error" and trial.error is not None
        assert "HTTP 401: Incorrect API key" in trial.error.message
    assert again[0].transcript.model_calls[0].replayed


def test_a_cancelled_call_is_no_fault() -> None:
    """An agent that gives up waiting (its own timeout) and answers from elsewhere is the
    agent's choice, not a provider fault."""

    def slow(received: Received) -> Answer:
        time.sleep(1.0)
        return good(received)

    with AnswerServer(default=slow) as server:

        async def agent(prompt: str) -> str:
            client = openai.AsyncOpenAI(base_url=server.openai_base_url, api_key=KEY, max_retries=0)
            async with client:
                with anyio.move_on_after(0.2):
                    await client.chat.completions.create(
                        model=OPENAI_MODEL, messages=[{"role": "user", "content": prompt}]
                    )
            return "ok"

        task = Task(id="t", input="Hi", graders=[graders.contains("ok")])
        _, trials, _ = run_trials(Suite(id="c", harness=agent, tasks=[task]), timeout=30)
    assert errors(trials) == [] and trials[0].verdict == "pass"
    (model_call,) = trials[0].transcript.model_calls
    assert model_call.error is not None and "CancelledError" in model_call.error


def test_model_faults_in_a_suite_file(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        "id: s\nmodel: scripted/x\ntasks:\n"
        "  - {id: a, input: hi, model_faults: allow}\n"
        "  - {id: b, input: hi}\n"
        "dataset:\n  path: rows.jsonl\n  model_faults: allow\n",
        encoding="utf-8",
    )
    (tmp_path / "rows.jsonl").write_text('{"input": "x"}\n', encoding="utf-8")
    a, b, row = load_suite_file(tmp_path).tasks
    assert (a.model_faults, b.model_faults, row.model_faults) == ("allow", "error", "allow")
    (tmp_path / "suite.yaml").write_text(
        "id: s\nmodel: scripted/x\ntasks:\n  - {id: a, input: hi, model_faults: ignore}\n",
        encoding="utf-8",
    )
    assert problems_of(tmp_path) == [
        "suite.yaml:4: tasks[0].model_faults: Input should be 'error' or 'allow', "
        "got a string 'ignore'"
    ]


def test_model_faults_in_python_is_checked() -> None:
    with pytest.raises(SuiteError, match="model_faults: must be 'error' or 'allow', got 'no'"):
        Task(id="t", input="x", model_faults="no")  # type: ignore[arg-type]
