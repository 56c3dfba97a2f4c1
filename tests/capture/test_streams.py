"""Streamed answers under capture: they reach the agent as they arrive, are recorded whole,
replay as the recorded stream, and a stream the server cuts off is an error, never a pass."""

from __future__ import annotations

import threading
from pathlib import Path

import anthropic
import openai

from tests.capture.helpers import KEY, errors, run_trials
from tests.fakes.provider_server import Cut, Hold, ProviderServer, Reply
from trialkit import Suite, Task, graders
from trialkit.models.cassette import CacheMode, Cassette

BASE = {"openai": "", "anthropic": ""}
RELEASE = threading.Event()


def suite(harness: object, prompt: str = "Paris", trials: int = 1) -> Suite:
    return Suite(
        id="streams",
        kind="capability",
        trials=trials,
        harness=harness,
        tasks=[Task(id="t", input=prompt, graders=[graders.contains("paris")])],
    )


def streaming_agent(prompt: str) -> str:
    """Reads a chat stream chunk by chunk; notes whether the first piece came before the
    server was allowed to send the last one."""
    client = openai.OpenAI(base_url=BASE["openai"], api_key=KEY, max_retries=0)
    pieces: list[str] = []
    early = None
    with client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": prompt}],
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                if early is None:
                    early = not RELEASE.is_set()
                    RELEASE.set()
                pieces.append(chunk.choices[0].delta.content)
    client.close()
    return f"{''.join(pieces)} early={early}"


def test_a_stream_reaches_the_agent_chunk_by_chunk_and_is_recorded_whole(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["openai"] = provider_server.openai_base_url
    RELEASE.clear()
    provider_server.script(Hold(RELEASE, reply=Reply("Paris is the capital")))
    _, trials, _ = run_trials(
        suite(streaming_agent), cassette=Cassette(tmp_path, CacheMode.RECORD), timeout=30
    )
    assert errors(trials) == []
    (trial,) = trials
    assert trial.outcome.output == "Paris is the capital early=True"
    (call,) = trial.transcript.model_calls
    assert call.response is not None
    assert call.response["message"]["content"] == "Paris is the capital"
    assert call.usage.output_tokens > 0 and call.status == 200
    provider_server.stop()

    RELEASE.clear()
    _, replayed, _ = run_trials(suite(streaming_agent), cassette=Cassette(tmp_path, "replay"))
    assert errors(replayed) == []
    assert replayed[0].outcome.output == "Paris is the capital early=True"
    assert replayed[0].transcript.model_calls[0].replayed


def careless_agent(prompt: str) -> str:
    """Takes whatever the stream gave, even when it broke off: such an agent may 'pass'."""
    client = openai.OpenAI(base_url=BASE["openai"], api_key=KEY, max_retries=0)
    pieces: list[str] = []
    try:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
    except openai.APIError:
        pass
    finally:
        client.close()
    return "".join(pieces) or "Paris"


def test_a_stream_the_server_ends_early_is_an_error_not_a_pass(
    provider_server: ProviderServer,
) -> None:
    BASE["openai"] = provider_server.openai_base_url
    provider_server.script(Cut(after_events=3, reply=Reply("Paris is the capital of France")))
    _, trials, _ = run_trials(suite(careless_agent))
    (trial,) = trials
    assert trial.verdict == "error"
    assert trial.error is not None and trial.error.type == "StreamCut"
    assert "before its final event" in trial.error.message


def test_a_stream_the_connection_drops_is_an_error_not_a_pass(
    provider_server: ProviderServer,
) -> None:
    BASE["openai"] = provider_server.openai_base_url
    provider_server.script(
        Cut(after_events=3, abrupt=True, reply=Reply("Paris is the capital of France"))
    )
    _, trials, _ = run_trials(suite(careless_agent))
    (trial,) = trials
    assert trial.verdict == "error"
    assert trial.error is not None and trial.error.type == "StreamCut"
    assert "broke off" in trial.error.message


def impatient_agent(prompt: str) -> str:
    """Stops reading after the first piece of text and closes the stream."""
    client = openai.OpenAI(base_url=BASE["openai"], api_key=KEY, max_retries=0)
    try:
        with client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True
        ) as stream:
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    return chunk.choices[0].delta.content
    finally:
        client.close()
    return ""


def test_a_stream_the_agent_closes_early_is_kept_as_far_as_it_was_read(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["openai"] = provider_server.openai_base_url
    provider_server.script(Reply("Paris is the capital of France"))
    _, trials, _ = run_trials(suite(impatient_agent), cassette=Cassette(tmp_path, CacheMode.RECORD))
    assert errors(trials) == []
    first = trials[0].outcome.output
    assert first and "Paris is the capital of France".startswith(first)
    assert len(trials[0].transcript.model_calls) == 1
    provider_server.stop()
    _, replayed, _ = run_trials(suite(impatient_agent), cassette=Cassette(tmp_path, "replay"))
    assert errors(replayed) == []
    assert replayed[0].outcome.output == first


async def anthropic_agent(prompt: str) -> str:
    client = anthropic.AsyncAnthropic(base_url=BASE["anthropic"], api_key=KEY, max_retries=0)
    async with client.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": prompt}],
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
    await client.close()
    return text


def test_an_anthropic_stream_replays_as_recorded(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["anthropic"] = provider_server.anthropic_base_url
    provider_server.script(Reply("Paris, first"), Reply("Paris, second"))
    _, trials, _ = run_trials(
        suite(anthropic_agent, trials=2),
        cassette=Cassette(tmp_path, CacheMode.RECORD),
        concurrency=1,
    )
    assert errors(trials) == []
    assert [t.outcome.output for t in trials] == ["Paris, first", "Paris, second"]
    for trial in trials:
        (call,) = trial.transcript.model_calls
        assert call.model == "anthropic/claude-sonnet-4-5"
        assert call.usage.input_tokens > 0 and call.cost_usd is not None
    connections = provider_server.connections
    provider_server.stop()
    _, replayed, _ = run_trials(
        suite(anthropic_agent, trials=2), cassette=Cassette(tmp_path, "replay"), offline=True
    )
    assert errors(replayed) == []
    assert [t.outcome.output for t in replayed] == ["Paris, first", "Paris, second"]
    assert [t.usage for t in replayed] == [t.usage for t in trials]
    assert provider_server.connections == connections
