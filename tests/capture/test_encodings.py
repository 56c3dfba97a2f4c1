"""Content-encoded answers under capture: the agent sees exactly what it sees without capture.

A real loopback server sends each answer compressed as the test says (gzip, deflate, stacked
codings, identity, a coding the HTTP client does not know, br and zstd where both ends can),
in chunks that split events, lines and characters. The official SDKs read it, sync and async,
streamed and not, once outside any trial and once as an agent in a captured trial: both must
see the same text, and the trial's transcript must hold it.
"""

from __future__ import annotations

import gzip
import importlib
import itertools
import json
import zlib

import httpx2
import pytest

from tests.capture.helpers import errors, run_trials
from tests.capture.sdk_calls import TEXT, Mode, Sdk, ask, ask_async, events_of, good
from tests.fakes.answer_server import Answer, AnswerServer, Received, can_encode
from trialkit import Suite, Task, graders
from trialkit.capture.hook import _chain

CODINGS = ["identity", "gzip", "deflate", "gzip, gzip", "deflate, gzip", "gzip, identity"]
CODINGS += [
    coding
    for coding in ("br", "zstd")
    if can_encode(coding) and coding in httpx2._decoders.SUPPORTED_DECODERS
]
CALLS = list(itertools.product(("openai", "anthropic"), ("sync", "async"), (True, False)))


def split_every(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


def encoded(coding: str):  # type: ignore[no-untyped-def]
    """Well-formed answers with Content-Encoding `coding`; a stream in 7-byte chunks."""

    def answer(received: Received) -> Answer:
        if received.request.get("stream") is True:
            body = b"".join(events_of(received))
            return Answer(
                stream=split_every(body, 7), content_type="text/event-stream", encoding=coding
            )
        return good(received, encoding=coding)

    return answer


def seen(sdk: Sdk, mode: Mode, stream: bool, base_url: str) -> str:
    """What the agent got: the text, or the exception it got instead."""
    try:
        return ask(sdk, mode, stream, base_url)
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"


def trial_of(sdk: Sdk, mode: Mode, stream: bool, base_url: str):  # type: ignore[no-untyped-def]
    def agent(prompt: str) -> str:
        return seen(sdk, mode, stream, base_url)

    async def async_agent(prompt: str) -> str:
        try:
            return await ask_async(sdk, stream, base_url)
        except Exception as exc:
            return f"raised {type(exc).__name__}: {exc}"

    suite = Suite(
        id="encodings",
        harness=async_agent if mode == "async" else agent,
        tasks=[Task(id="t", input="Hi", graders=[graders.contains("paris")])],
    )
    _, trials, _ = run_trials(suite, timeout=30)
    return trials[0]


@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize(("sdk", "mode", "stream"), CALLS)
def test_an_encoded_answer_reads_the_same_with_capture_as_without(
    coding: str, sdk: Sdk, mode: Mode, stream: bool
) -> None:
    with AnswerServer(default=encoded(coding)) as server:
        bare = seen(sdk, mode, stream, server.url)
        trial = trial_of(sdk, mode, stream, server.url)
        encodings = {r.headers.get("accept-encoding") for r in server.received}
    assert bare == TEXT
    assert trial.outcome.output == bare
    assert errors([trial]) == [] and trial.verdict == "pass"
    (call,) = trial.transcript.model_calls
    assert call.error is None and call.status == 200
    assert call.response is not None and call.response["message"]["content"] == TEXT
    assert encodings and None not in encodings  # the SDK asked for compression itself


@pytest.mark.parametrize(("sdk", "mode", "stream"), CALLS)
def test_a_coding_the_client_does_not_know_reaches_the_agent_as_sent(
    sdk: Sdk, mode: Mode, stream: bool
) -> None:
    """The HTTP client passes a body with an unknown coding through undecoded (here: plain
    text, so it reads fine): capture reads the same bytes."""
    coding = "x-trialkit-test"

    def answer(received: Received) -> Answer:
        return _labelled(good(received), coding)

    with AnswerServer(default=answer) as server:
        bare = seen(sdk, mode, stream, server.url)
        trial = trial_of(sdk, mode, stream, server.url)
    assert bare == TEXT and trial.outcome.output == TEXT
    assert errors([trial]) == []
    assert trial.transcript.model_calls[0].response["message"]["content"] == TEXT  # type: ignore[index]


def _labelled(answer: Answer, coding: str) -> Answer:
    return Answer(
        answer.body,
        stream=answer.stream,
        content_type=answer.content_type,
        headers={"content-encoding": coding},
    )


@pytest.mark.parametrize(("sdk", "mode", "stream"), CALLS)
def test_a_corrupt_compressed_answer_fails_the_same_and_is_no_answer(
    sdk: Sdk, mode: Mode, stream: bool
) -> None:
    """gzip whose bytes were damaged in transit: the SDK raises with capture as without, and
    the trial is an error naming the encoding, even though the agent carried on."""

    def answer(received: Received) -> Answer:
        whole = good(received)
        body = whole.body if whole.stream is None else b"".join(whole.stream)
        damaged = damaged_gzip(body, keep=len(body) // 2)
        headers = {"content-encoding": "gzip"}
        if whole.stream is None:
            return Answer(damaged, headers=headers)
        return Answer(
            stream=split_every(damaged, 16), content_type="text/event-stream", headers=headers
        )

    with AnswerServer(default=answer) as server:
        bare = seen(sdk, mode, stream, server.url)
        trial = trial_of(sdk, mode, stream, server.url)
    assert bare.startswith("raised ")
    assert trial.outcome.output == bare
    assert trial.verdict == "error" and trial.error is not None
    assert trial.error.type == "ModelFault"
    assert "no usable answer from POST http://127.0.0.1:" in trial.error.message
    if stream:  # a body read as it comes: the call knows the encoding failed
        assert "cannot be decoded (Content-Encoding: gzip)" in trial.error.message
    (call,) = trial.transcript.model_calls
    assert call.error is not None


def damaged_gzip(data: bytes, *, keep: int) -> bytes:
    """gzip of `data` whose bytes after the first `keep` bytes' worth are garbage: a reader
    gets the start, then a decoding error ("invalid block type")."""
    compressor = zlib.compressobj(wbits=31)
    start = compressor.compress(data[:keep]) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return start + b"\xff" * 8


@pytest.mark.parametrize("coding", ["gzip", "deflate, gzip"])
@pytest.mark.parametrize("module", ["httpx", "httpx2"])
def test_a_compressed_stream_read_with_the_http_client_itself(coding: str, module: str) -> None:
    """litellm reads through `httpx`, whose decoders return bytes (`httpx2`'s, iterators):
    a stream read line by line, sync and async, is the same with capture as without."""
    http = importlib.import_module(module)
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}

    def text_of(lines: list[str]) -> str:
        chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
        return "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )

    with AnswerServer(default=encoded(coding)) as server:
        url = f"{server.url}/v1/chat/completions"

        def agent(prompt: str) -> str:
            with http.Client() as client, client.stream("POST", url, json=body) as response:
                return text_of(list(response.iter_lines()))

        async def async_agent(prompt: str) -> str:
            async with (
                http.AsyncClient() as client,
                client.stream("POST", url, json=body) as response,
            ):
                return text_of([line async for line in response.aiter_lines()])

        for harness in (agent, async_agent):
            task = Task(id="t", input="Hi", graders=[graders.contains("paris")])
            _, trials, _ = run_trials(Suite(id="http", harness=harness, tasks=[task]), timeout=30)
            assert errors(trials) == [] and trials[0].outcome.output == TEXT
            (call,) = trials[0].transcript.model_calls
            assert call.response is not None and call.response["message"]["content"] == TEXT


@pytest.mark.parametrize("module", ["httpx", "httpx2"])
def test_without_the_modules_own_decoder_the_codings_are_undone_alike(module: str) -> None:
    """The fallback for an HTTP module whose responses lack `_get_content_decoder`: the
    module's decoders, last coding first, an unknown coding passed over as the module does."""
    http = importlib.import_module(module)
    data = TEXT.encode() * 50
    compressor = zlib.compressobj(wbits=15)
    body = compressor.compress(gzip.compress(data)) + compressor.flush()
    chain = _chain(http, "gzip, x-unknown, deflate")
    decoded = b"".join(chain.decode(piece) for piece in split_every(body, 7)) + chain.flush()
    assert decoded == data
