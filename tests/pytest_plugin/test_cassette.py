"""A cassette recorded in one pytest session and replayed, offline, in another."""

from __future__ import annotations

import pytest

from tests.fakes.provider_server import ProviderServer, Reply
from tests.pytest_plugin.conftest import stored_runs

pytest.importorskip("openai", reason="the agent of this test calls the OpenAI SDK")

SDK_AGENT = """
import os

import openai

from trialkit import Suite, Task, graders


def agent(prompt):
    client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key="sk-test", max_retries=0)
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
    )
    return reply.choices[0].message.content


capitals = Suite(id="capitals", kind="regression", trials=2, harness=agent, tasks=[
    Task(id="france", input="What is the capital of France?", graders=[graders.contains("paris")]),
])
"""


def test_record_then_replay_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(eval_sdk=SDK_AGENT)
    cassette = ["--trialkit-cache", "cassette"]
    with ProviderServer() as server:
        server.script(Reply("Paris."), Reply("It is Paris."))
        monkeypatch.setenv("AGENT_BASE_URL", server.openai_base_url)
        recorded = pytester.runpytest_subprocess(
            *cassette, "--trialkit-cache-mode", "record", "--trialkit-store", "record.db"
        )
        recorded.assert_outcomes(passed=1)
        assert len(server.requests) == 2
    assert any((pytester.path / "cassette").rglob("*.json"))

    # Replay, offline, with the agent pointed at a host it may not reach: nothing is called.
    monkeypatch.setenv("AGENT_BASE_URL", "https://api.openai.com/v1")
    replayed = pytester.runpytest_subprocess(
        *cassette,
        "--trialkit-cache-mode",
        "replay",
        "--trialkit-offline",
        "--trialkit-store",
        "replay.db",
    )
    replayed.assert_outcomes(passed=1)
    report = stored_runs(pytester.path / "replay.db")["capitals"]
    outputs = [r.output for r in report.tasks[0].results]
    assert sorted(outputs) == ["It is Paris.", "Paris."]  # each trial replays its own answer
    original = stored_runs(pytester.path / "record.db")["capitals"]
    assert outputs == [r.output for r in original.tasks[0].results]
    assert report.run.config["cache"]["mode"] == "replay"
    assert report.run.config["cache"]["offline"] is True


def test_a_replay_miss_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(eval_sdk=SDK_AGENT)
    (pytester.path / "cassette").mkdir()
    monkeypatch.setenv("AGENT_BASE_URL", "https://api.openai.com/v1")
    result = pytester.runpytest_subprocess(
        "--trialkit-cache", "cassette", "--trialkit-cache-mode", "replay", "--trialkit-offline"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*trial 0: error: CassetteMiss: replay found no recording for task 'france', trial 0*"]
    )
