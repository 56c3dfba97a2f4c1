"""A command-line agent that calls its provider with the official SDK, taking the base URL
from `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` as such agents do: `SubprocessAgent` points it
at the model proxy, so its calls are captured, counted once and replayed from a cassette."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.capture.helpers import KEY, errors, run_trials
from tests.fakes.provider_server import ProviderServer, RoundTrip
from tests.harness import sdk_agent
from trialkit import Suite, Task, graders
from trialkit.harness.subprocess import SubprocessAgent
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.transcript import Usage

AGENT = str(Path(__file__).with_name("sdk_agent.py"))
PROXY_URL = "http://127.0.0.1:{port}/trialkit/"
REPORTED = Usage(input_tokens=130, output_tokens=5, cache_read_tokens=100, cache_write_tokens=20)


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's keys come from trialkit's environment, as they would."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def agent(*args: str, server: ProviderServer | None = None, **options: Any) -> SubprocessAgent:
    if server is not None:
        options.setdefault("upstream", {"anthropic": server.url, "openai": server.openai_base_url})
    return SubprocessAgent([sys.executable, AGENT, *args], timeout=60, **options)


def suite(harness: SubprocessAgent, *prompts: str, trials: int = 1) -> Suite:
    return Suite(
        id="proxied",
        trials=trials,
        harness=harness,
        tasks=[
            Task(id=f"t{i}", input=prompt, graders=[graders.contains(prompt.partition(" ")[2])])
            for i, prompt in enumerate(prompts)
        ],
    )


@pytest.mark.parametrize(
    ("prompt", "endpoint"),
    [
        ("anthropic Paris", "/v1/messages"),
        ("responses Rome", "/v1/responses"),
        ("chat Oslo", "/v1/chat/completions"),
    ],
)
def test_the_agents_calls_are_captured_through_the_proxy(
    provider_server: ProviderServer, prompt: str, endpoint: str
) -> None:
    report, trials, _ = run_trials(suite(agent(server=provider_server), prompt, trials=2))
    assert errors(trials) == []
    assert report.summary.passed_tasks == 1
    for trial in trials:
        (call,) = trial.transcript.model_calls
        assert call.endpoint == f"POST {provider_server.url}{endpoint}"
        assert call.status == 200 and call.role == "agent" and not call.replayed
        assert call.response is not None
        assert call.response["message"]["content"] == prompt.partition(" ")[2]
        assert call.usage.output_tokens > 0 and (call.cost_usd or 0) > 0
        assert trial.usage == call.usage
        assert trial.cost_usd == pytest.approx(call.cost_usd)
        assert KEY not in trial.transcript.model_dump_json()
    assert [r.path for r in provider_server.requests] == [endpoint, endpoint]
    assert {r.api_key for r in provider_server.requests} == {KEY}


@pytest.mark.parametrize("output", ["json", "stream-json"])
def test_usage_is_counted_once_and_the_agents_figure_is_kept_on_the_turn(
    provider_server: ProviderServer, output: str
) -> None:
    _, trials, _ = run_trials(
        suite(agent("--output", output, server=provider_server), "anthropic Lima")
    )
    assert errors(trials) == []
    (trial,) = trials
    assert trial.outcome.output == "Lima"
    (call,) = trial.transcript.model_calls
    assert trial.usage == call.usage != REPORTED
    assert trial.transcript.usage == call.usage
    assert trial.cost_usd == pytest.approx(call.cost_usd)
    (turn,) = trial.transcript.turns
    assert turn.reported_usage == REPORTED
    assert turn.reported_cost_usd == sdk_agent.REPORTED_COST
    assert turn.cost_usd is None


def test_the_agents_own_tool_calls_are_not_recorded_twice(tmp_path: Path) -> None:
    with ProviderServer(default=RoundTrip()) as server:
        harness = agent("--output", "stream-json", server=server)
        _, trials, _ = run_trials(suite(harness, "tool Write it"))
    assert errors(trials) == []
    (trial,) = trials
    assert trial.outcome.output == "The tool answered: written"
    assert len(trial.transcript.model_calls) == 2
    (write,) = trial.transcript.tool_calls
    assert write.name == "Write" and write.arguments == {"file_path": "Write it"}
    assert write.result == "written"  # paired from the request that sent it back
    assert trial.transcript.turns[0].reported_usage == REPORTED


def test_record_then_replay_with_the_upstream_stopped(tmp_path: Path) -> None:
    folder = tmp_path / "cassette"
    prompts = ("anthropic Paris", "responses Rome", "chat Oslo")
    with ProviderServer() as server:
        harness = agent("--output", "json", server=server)
        _, recorded, _ = run_trials(
            suite(harness, *prompts, trials=2), cassette=Cassette(folder, CacheMode.RECORD)
        )
        assert errors(recorded) == []
        assert server.request_count == 6
    assert not any(KEY in path.read_text() for path in folder.rglob("*.json"))

    _, replayed, _ = run_trials(
        suite(harness, *prompts, trials=2),
        cassette=Cassette(folder, CacheMode.REPLAY),
        offline=True,
    )
    assert errors(replayed) == []
    assert [t.outcome.output for t in replayed] == [t.outcome.output for t in recorded]
    assert [t.outcome.output for t in replayed] == [
        "Paris",
        "Paris",
        "Rome",
        "Rome",
        "Oslo",
        "Oslo",
    ]
    assert all(c.replayed for t in replayed for c in t.transcript.model_calls)
    assert [t.usage for t in replayed] == [t.usage for t in recorded]


def test_a_replay_miss_is_the_trials_error(tmp_path: Path) -> None:
    folder = tmp_path / "cassette"
    with ProviderServer() as server:
        harness = agent(server=server)
        run_trials(suite(harness, "anthropic Paris"), cassette=Cassette(folder, CacheMode.RECORD))
    _, trials, _ = run_trials(
        suite(harness, "anthropic Madrid"), cassette=Cassette(folder, CacheMode.REPLAY)
    )
    (trial,) = trials
    assert trial.error is not None
    assert "t0" in trial.error.message


def test_the_openai_base_url_placeholder_in_the_command(provider_server: ProviderServer) -> None:
    harness = agent("--base-url", "{openai_base_url}", "--output", "json", server=provider_server)
    _, trials, _ = run_trials(suite(harness, "chat Kyiv"))
    assert errors(trials) == []
    (trial,) = trials
    (call,) = trial.transcript.model_calls
    assert call.endpoint == f"POST {provider_server.openai_base_url}/chat/completions"

    _, trials, _ = run_trials(
        suite(agent("--base-url", "{openai_base_url}", "--output", "json"), "env")
    )
    told = json.loads(trials[0].outcome.output or "")
    url = told["argv"][1]
    assert url == told["env"]["OPENAI_BASE_URL"] == told["env"]["TRIALKIT_OPENAI_BASE_URL"]
    assert (
        url.startswith("http://127.0.0.1:") and "/trialkit/" in url and url.endswith("/openai/v1")
    )
    assert told["env"]["ANTHROPIC_BASE_URL"].endswith("/anthropic")


def test_the_upstream_is_the_base_url_the_agents_env_names(provider_server: ProviderServer) -> None:
    harness = agent(env={"OPENAI_BASE_URL": provider_server.openai_base_url})
    _, trials, _ = run_trials(suite(harness, "chat Bern"))
    assert errors(trials) == []
    (call,) = trials[0].transcript.model_calls
    assert call.endpoint == f"POST {provider_server.openai_base_url}/chat/completions"


def test_without_the_proxy_the_env_is_left_alone(
    provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", provider_server.url)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    harness = agent("--output", "json", proxy=False, home=True)
    _, trials, _ = run_trials(suite(harness, "env"))
    told = json.loads(trials[0].outcome.output or "")["env"]
    assert told["ANTHROPIC_BASE_URL"] == provider_server.url
    assert told["OPENAI_BASE_URL"] is None
    assert told["TRIALKIT_ANTHROPIC_BASE_URL"] is None
    assert told["TRIALKIT_OPENAI_BASE_URL"] is None

    _, trials, _ = run_trials(suite(agent("--output", "json", proxy=False), "anthropic Quito"))
    (trial,) = trials
    assert errors(trials) == [] and trial.outcome.output == "Quito"
    assert trial.transcript.model_calls == []  # the proxy was not in the way
    assert trial.usage == REPORTED  # the agent's own figure is all there is
    assert trial.cost_usd == pytest.approx(sdk_agent.REPORTED_COST)
    assert trial.transcript.turns[0].reported_usage is None
    assert provider_server.connections == 1

    with pytest.raises(ValueError, match="proxy=False"):
        agent("--base-url", "{openai_base_url}", proxy=False)


def test_each_trial_has_its_own_home_with_its_files(provider_server: ProviderServer) -> None:
    files = {
        "config.json": '{"base": "{anthropic_base_url}", "home": "{home}"}',
        ".agent/settings.txt": "workspace={workspace}",
    }
    harness = agent("--output", "json", home=True, files=files, server=provider_server)
    _, trials, _ = run_trials(suite(harness, "env", trials=3))
    assert errors(trials) == []
    seen = [json.loads(t.outcome.output or "") for t in trials]
    homes = [told["env"]["HOME"] for told in seen]
    assert len(set(homes)) == 3
    assert all(home != os.environ.get("HOME") for home in homes)
    for told, home in zip(seen, homes, strict=True):
        assert told["home_mode"] == "0o700"
        config = json.loads(told["files"]["config.json"]["text"])
        assert config == {"base": told["env"]["ANTHROPIC_BASE_URL"], "home": home}
        assert told["files"]["config.json"]["mode"] == "0o600"
        settings = told["files"][".agent/settings.txt"]["text"]
        assert settings.startswith("workspace=/") and "{workspace}" not in settings
        assert not os.path.exists(home)  # removed after the trial

    with pytest.raises(ValueError, match="home=True"):
        agent(files={"a": "b"})
    with pytest.raises(ValueError, match="inside the agent's home"):
        agent(home=True, files={"../escape": "b"})


def test_the_proxy_runs_for_the_run_and_stops_with_it(provider_server: ProviderServer) -> None:
    from trialkit.capture.proxy import shared_proxy

    proxy = shared_proxy()
    users = proxy._users  # other users in this process (none, unless a test leaked one)
    seen: list[bool] = []

    def while_running(ctx: object) -> bool:
        seen.append(proxy.running)
        return True

    checked = Suite(
        id="lifetime",
        harness=agent(server=provider_server),
        tasks=[
            Task(id="t", input="anthropic Lima", graders=[graders.predicate("up", while_running)])
        ],
    )
    _, trials, _ = run_trials(checked)
    assert errors(trials) == [] and seen == [True]
    assert proxy._users == users
    if users == 0:
        assert not proxy.running  # the run's end stopped it: no thread, no port left behind
