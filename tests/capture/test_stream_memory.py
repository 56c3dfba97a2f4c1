"""A streamed answer is assembled as it arrives: capture's memory follows the answer's text,
not the size of its stream.

The same agent reads the same long stream in a trial with capture off and in one with capture
on; the peak of memory traced (tracemalloc) during each run is compared, as a ratio in the
same test. Keeping every raw chunk and parsing the body again at the end cost 4x (long
deltas) to 11x (short deltas) the bare run; assembling as it comes, about 1.1x to 1.5x.
(Peak RSS of a 50 MB answer read by the openai SDK: benchmarks/capture_memory.py.)
"""

from __future__ import annotations

import json
import tracemalloc

import httpx2
import pytest

from tests.capture.helpers import errors, run_trials
from tests.fakes.answer_server import Answer, AnswerServer
from trialkit import Suite, Task
from trialkit.trial import Trial

LIMIT = 2.0
"""The most capture's run may trace, as a multiple of the run without capture."""


def stream(events: int, delta: int) -> list[bytes]:
    """A chat stream of `events` deltas of `delta` characters, in 64 KB chunks."""
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    piece = {**head, "choices": [{"index": 0, "delta": {"content": "x" * delta}}]}
    stop = {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = b"".join(
        [
            f"data: {json.dumps(piece)}\n\n".encode() * events,
            f"data: {json.dumps(stop)}\n\n".encode(),
            b"data: [DONE]\n\n",
        ]
    )
    return [body[start : start + 65536] for start in range(0, len(body), 65536)]


def traced_peak(suite: Suite, *, capture: bool) -> tuple[float, Trial]:
    tracemalloc.start()
    try:
        _, trials, _ = run_trials(suite, capture=capture)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, trials[0]


@pytest.mark.parametrize(("events", "delta"), [(15_000, 8), (2_000, 1_000)])
def test_capture_of_a_long_stream_costs_about_what_the_bare_run_does(
    events: int, delta: int
) -> None:
    chunks = stream(events, delta)
    with AnswerServer(default=Answer(stream=chunks, content_type="text/event-stream")) as server:

        def agent(prompt: str) -> str:
            """Reads the stream as an SDK does, line by line, and joins the text."""
            texts = []
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": prompt}]}
            with (
                httpx2.Client() as client,
                client.stream("POST", f"{server.url}/v1/chat/completions", json=body) as response,
            ):
                for line in response.iter_lines():
                    if line.startswith("data: {"):
                        choices = json.loads(line[6:])["choices"]
                        texts.append(choices[0]["delta"].get("content") or "")
            return f"{len(''.join(texts))} characters"

        suite = Suite(id="memory", harness=agent, tasks=[Task(id="t", input="hi")])
        for capture in (False, True):  # warm up: imports and first-use caches are not traced
            run_trials(suite, capture=capture)
        bare, plain = traced_peak(suite, capture=False)
        captured, trial = traced_peak(suite, capture=True)
    assert errors([plain, trial]) == []
    assert trial.outcome.output == f"{events * delta} characters"
    (call,) = trial.transcript.model_calls
    assert call.response is not None and len(call.response["message"]["content"]) == events * delta
    assert captured / bare <= LIMIT, (captured, bare, sum(map(len, chunks)))
