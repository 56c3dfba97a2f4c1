"""Recordings of captured calls that lie: a stream recorded without its final event, or an answer
with a field of the wrong type, is refused — at replay (the trial is an error naming the file
and the recording, whatever the agent does with the exception) and by `trialkit cache verify`
(one line per bad recording, exit 1) — and never becomes a raw Python error.

The recordings are made for real: the official SDKs, with capture on, against the fake provider
on loopback; then edited as a hand, a merge or a broken tool might edit them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner

from tests.capture.helpers import KEY, run_trials
from tests.fakes.provider_server import ProviderServer, Reply
from trialkit import Suite, Task, graders
from trialkit.cli.main import cli
from trialkit.models.cassette import CacheMode, Cassette, CassetteError
from trialkit.models.cassette_http import replay_problem, stream_ended
from trialkit.models.cassette_tools import verify_cassette
from trialkit.trial import Trial

BASE: dict[str, str] = {}
PROMPT = "Capital of France?"


def _chat(prompt: str) -> str:
    client = openai.OpenAI(base_url=BASE["openai"], api_key=KEY, max_retries=0)
    try:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    finally:
        client.close()


def _responses(prompt: str) -> str:
    client = openai.OpenAI(base_url=BASE["openai"], api_key=KEY, max_retries=0)
    try:
        stream = client.responses.create(model="gpt-4o-mini", input=prompt, stream=True)
        return "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    finally:
        client.close()


def _messages(prompt: str) -> str:
    client = anthropic.Anthropic(base_url=BASE["anthropic"], api_key=KEY, max_retries=0)
    try:
        with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": prompt}]
        ) as stream:
            return "".join(stream.text_stream)
    finally:
        client.close()


AGENTS: dict[str, Callable[[str], str]] = {
    "chat": _chat,
    "responses": _responses,
    "messages": _messages,
}


def careless(api: str) -> Callable[[str], str]:
    """The agent of `api`, made to swallow whatever goes wrong and answer anyway: such an
    agent must not pass on a recording that lies."""

    def agent(prompt: str) -> str:
        try:
            return AGENTS[api](prompt)
        except Exception:
            return "Paris"

    return agent


def suite(harness: Callable[[str], str]) -> Suite:
    return Suite(
        id="lies",
        kind="capability",
        trials=1,
        harness=harness,
        tasks=[Task(id="t", input=PROMPT, graders=[graders.contains("paris")])],
    )


def record(api: str, server: ProviderServer, root: Path) -> Path:
    """Record one streamed call of `api`; the path of its recording."""
    BASE.update(openai=server.openai_base_url, anthropic=server.anthropic_base_url)
    server.script(Reply("Paris is the capital of France, and has been for a long time."))
    _, trials, _ = run_trials(suite(AGENTS[api]), cassette=Cassette(root, CacheMode.RECORD))
    assert [t.error for t in trials] == [None]
    assert trials[0].verdict == "pass"
    [path] = root.glob("*/*/*.json")
    return path


def edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def replay(api: str, root: Path) -> Trial:
    _, trials, _ = run_trials(
        suite(careless(api)), cassette=Cassette(root, CacheMode.REPLAY), offline=True
    )
    [trial] = trials
    return trial


# -- a stream without its final event ---------------------------------------------------------

FINAL = {"chat": "[DONE]", "responses": "response.completed", "messages": "message_stop"}


@pytest.mark.parametrize("api", sorted(AGENTS))
def test_a_stream_recorded_without_its_final_event_is_refused(
    api: str, provider_server: ProviderServer, tmp_path: Path
) -> None:
    path = record(api, provider_server, tmp_path)
    events = json.loads(path.read_text())["responses"][0]["response"]["events"]
    assert FINAL[api] in events[-1] or FINAL[api] in events[-2]
    assert stream_ended(api, events)

    def cut(data: dict[str, Any]) -> None:  # the last content delta and all after it go
        answer = data["responses"][0]["response"]
        last_delta = max(i for i, e in enumerate(answer["events"]) if "delta" in e)
        answer["events"] = answer["events"][:last_delta]

    edit(path, cut)
    provider_server.stop()

    trial = replay(api, tmp_path)
    assert trial.verdict == "error"
    assert trial.error is not None and trial.error.type == "CassetteError"
    assert str(path) in trial.error.message
    assert "trial 0 occurrence 0" in trial.error.message
    assert "ends before its final event" in trial.error.message
    assert "Traceback" not in trial.error.message

    result = CliRunner().invoke(cli, ["cache", "verify", str(tmp_path)])
    assert result.exit_code == 1, result.output
    [line] = result.stdout.strip().splitlines()
    assert line.startswith(f"{path}: trial 0 occurrence 0: the recorded stream ends before")


def test_verify_names_each_bad_recording_on_a_line_of_its_own(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    path = record("chat", provider_server, tmp_path)

    def three_trials(data: dict[str, Any]) -> None:
        [entry] = data["responses"]
        whole, cut = (
            entry["response"],
            {**entry["response"], "events": entry["response"]["events"][:1]},
        )
        data["responses"] = [
            {**entry, "trial": 0, "response": cut},
            {**entry, "trial": 1, "response": whole},
            {**entry, "trial": 2, "response": {**whole, "status": "ok"}},
        ]

    edit(path, three_trials)
    lines = verify_cassette(tmp_path)
    assert lines == [
        f"{path}: trial 0 occurrence 0: the recorded stream ends before its final event "
        "(`data: [DONE]` or a chunk with a finish_reason), after 1 event(s): it was cut short or "
        "edited, and would replay as a whole answer; delete the file and record again",
        f"{path}: trial 2 occurrence 0: status 'ok' is not an HTTP status",
    ]
    cassette = Cassette(tmp_path, CacheMode.REPLAY)
    model, key = "openai/gpt-4o-mini", path.stem
    assert cassette.lookup_http(model, key, trial=1, occurrence=0) is not None  # the good one
    for trial in (0, 2):
        with pytest.raises(CassetteError, match=f"trial {trial} occurrence 0: cannot be replayed"):
            cassette.lookup_http(model, key, trial=trial, occurrence=0)


def impatient(prompt: str) -> str:
    """Reads the first piece of text and closes the stream."""
    client = openai.OpenAI(base_url=BASE["openai"], api_key=KEY, max_retries=0)
    try:
        with client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True
        ) as stream:
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    return "Paris? " + chunk.choices[0].delta.content
    finally:
        client.close()
    return ""


def test_a_stream_the_agent_closed_early_is_recorded_as_such(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE.update(openai=provider_server.openai_base_url)
    provider_server.script(Reply(" ".join(["Paris is the capital of France."] * 40)))
    _, trials, _ = run_trials(suite(impatient), cassette=Cassette(tmp_path, CacheMode.RECORD))
    assert [t.error for t in trials] == [None]
    [path] = tmp_path.glob("*/*/*.json")
    answer = json.loads(path.read_text())["responses"][0]["response"]
    assert answer["closed_early"] is True
    assert not stream_ended("chat", answer["events"])
    assert verify_cassette(tmp_path) == []  # what the agent read, said as such: no lie

    def forged(data: dict[str, Any]) -> None:  # the mark gone: the same events now lie
        del data["responses"][0]["response"]["closed_early"]

    edit(path, forged)
    [line] = verify_cassette(tmp_path)
    assert "ends before its final event" in line


def test_a_whole_stream_is_not_marked(provider_server: ProviderServer, tmp_path: Path) -> None:
    path = record("messages", provider_server, tmp_path)
    answer = json.loads(path.read_text())["responses"][0]["response"]
    assert "closed_early" not in answer
    assert verify_cassette(tmp_path) == []


# -- answers with fields of the wrong type, at replay through the real SDK ----------------------

BAD_ANSWERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "status_text": lambda a: a.update(status="ok"),
    "status_true": lambda a: a.update(status=True),
    "status_float": lambda a: a.update(status=200.0),
    "status_huge": lambda a: a.update(status=10**30),
    "status_missing": lambda a: a.pop("status"),
    "events_text": lambda a: a.update(events="data: [DONE]\n\n"),
    "events_numbers": lambda a: a.update(events=[1, 2]),
    "events_nested": lambda a: a.update(events=[["data: {}\n\n"]]),
    "events_null": lambda a: a.update(events=None),
    "events_object": lambda a: a.update(events={"0": "data: [DONE]\n\n"}),
    "event_surrogate": lambda a: a["events"].insert(0, "data: \udcff\n\n"),
    "event_unended": lambda a: a["events"].insert(0, "data: {}"),
    "events_missing": lambda a: a.pop("events"),
    "two_bodies": lambda a: a.update(text="Paris"),
    "content_type_number": lambda a: a.update(content_type=5),
    "content_type_json": lambda a: a.update(content_type="application/json"),
    "extra_field": lambda a: a.update(refused=True),
    "closed_early_text": lambda a: a.update(closed_early="yes"),
}


@pytest.mark.parametrize("kind", sorted(BAD_ANSWERS))
def test_a_wrong_field_is_a_named_error_never_a_raw_one(
    kind: str, provider_server: ProviderServer, tmp_path: Path
) -> None:
    path = record("chat", provider_server, tmp_path)
    edit(path, lambda data: BAD_ANSWERS[kind](data["responses"][0]["response"]))
    provider_server.stop()
    trial = replay("chat", tmp_path)
    assert trial.verdict == "error"
    assert trial.error is not None and trial.error.type == "CassetteError", trial.error
    assert trial.error.message.startswith(f"{path}: trial 0 occurrence 0: cannot be replayed: ")
    [line] = verify_cassette(tmp_path)
    assert line.startswith(f"{path}: trial 0 occurrence 0: ") and "\n" not in line


def test_replay_problem_accepts_what_the_recorder_writes() -> None:
    whole = ['data: {"choices": [{"index": 0, "delta": {"content": "Paris"}}]}\n\n']
    whole.append("data: [DONE]\n\n")
    assert (
        replay_problem(
            "chat", {"status": 200, "content_type": "text/event-stream", "events": whole}
        )
        is None
    )
    assert (
        replay_problem("chat", {"status": 404, "content_type": "application/json", "json": None})
        is None
    )
    assert (
        replay_problem("chat", {"status": 200, "content_type": "text/html", "text": "<p>"}) is None
    )
    error = 'event: error\ndata: {"type": "error", "error": {"message": "overloaded"}}\n\n'
    assert (
        replay_problem(
            "messages", {"status": 200, "content_type": "text/event-stream", "events": [error]}
        )
        is None
    )  # an error event ends a stream too: the recording says what came
    assert (
        replay_problem(
            "embeddings", {"status": 200, "content_type": "text/event-stream", "events": whole}
        )
        == "the request's api 'embeddings' has no streamed answers"
    )
