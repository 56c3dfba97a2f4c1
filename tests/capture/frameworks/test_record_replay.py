"""Each framework's unmodified agent as a trialkit harness: several trials recorded against the
fake provider, then replayed with `--offline` against a port where no server listens (the
provider is stopped, as far as the agent can tell): identical outputs and verdicts, the right
number of model calls and tokens in every trial, and no connection to the provider."""

from __future__ import annotations

import inspect
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.capture.frameworks import weather_agents as agents
from tests.capture.helpers import errors, run_trials
from tests.fakes.provider_server import ProviderServer, RoundTrip
from trialkit import Suite, Task, graders
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.trial import Trial

pytestmark = pytest.mark.filterwarnings(
    "ignore:Items? .* using the .ReadOnly. qualifier:UserWarning"  # pydantic-ai's own types
)

AGENTS = sorted(name for name in dir(agents) if name.startswith("run_"))
TRIALS = 3
ONE_AT_A_TIME = {"run_litellm_openai"}
"""litellm's sync `completion` caches one OpenAI client per key, but threads that miss the
cache at once each make one and all but one are dropped unclosed (with their sockets): a race
of its own, seen without trialkit too. Its trials run one at a time here."""


def harness(name: str, base_url: str) -> Callable[..., Any]:
    """The agent, called as it is, with the provider's URL: sync stays sync, async async."""
    agent = getattr(agents, name)
    if inspect.iscoroutinefunction(agent):

        async def run_async(prompt: str) -> str:
            return str(await agent(prompt, base_url))

        return run_async

    def run(prompt: str) -> str:
        return str(agent(prompt, base_url))

    return run


def weather(name: str, base_url: str) -> Suite:
    return Suite(
        id=f"weather-{name}",
        kind="capability",
        trials=TRIALS,
        harness=harness(name, base_url),
        timeout=60,
        tasks=[
            Task(
                id="oslo",
                input="Oslo",
                graders=[
                    graders.contains("sunny in Oslo"),
                    graders.tool_called("get_weather", {"city": "Oslo"}),
                ],
            )
        ],
    )


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ProviderServer]:
    # One server for the module: langchain and litellm cache an HTTP client per base URL for
    # the life of the process, so a server per test would leave a client (and a socket) each.
    with ProviderServer(default=RoundTrip()) as server:
        yield server


@pytest.fixture
def server(shared_server: ProviderServer) -> ProviderServer:
    shared_server.reset()
    return shared_server


def nobody_listening() -> str:
    """A loopback URL whose port was free a moment ago: the provider, stopped."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def close_litellm() -> None:
    """litellm keeps an aiohttp session per event loop, and each run's loop ends with it; and
    its sync completions cache an HTTP client per worker thread that nobody closes (it leaks
    sockets without trialkit too), so close what it cached."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return
    await litellm.close_litellm_async_clients()
    cache = getattr(litellm.in_memory_llm_clients_cache, "cache_dict", {})
    for client in list(cache.values()):
        close = getattr(client, "close", None)
        if callable(close) and not inspect.iscoroutinefunction(close):
            close()
    cache.clear()


def facts(trial: Trial) -> tuple[Any, ...]:
    calls = trial.transcript.model_calls
    return (
        trial.outcome.output,
        trial.verdict,
        [c.model for c in calls],
        [c.usage for c in calls],
        [(t.name, t.arguments, t.result) for t in trial.transcript.tool_calls],
    )


@pytest.mark.parametrize("name", AGENTS)
def test_an_unmodified_agent_is_recorded_then_replayed_offline(
    name: str, server: ProviderServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "cassette"
    concurrency = 1 if name in ONE_AT_A_TIME else 3
    _, recorded, _ = run_trials(
        weather(name, server.url),
        cassette=Cassette(cassette, CacheMode.RECORD),
        concurrency=concurrency,
        after=close_litellm,
    )
    assert errors(recorded) == []
    per_trial = len(server.requests) / TRIALS
    assert [t.verdict for t in recorded] == ["pass"] * TRIALS
    for trial in recorded:
        calls = trial.transcript.model_calls
        assert len(calls) == per_trial >= 2  # one tool round trip: at least two model turns
        assert all(c.usage.input_tokens > 0 and c.usage.output_tokens > 0 for c in calls)
        assert all(c.status == 200 and c.error is None for c in calls)
        assert trial.usage.total_tokens == sum(c.usage.total_tokens for c in calls)
    assert any(cassette.rglob("*.json"))

    connections, requests = server.connections, len(server.requests)
    _, replayed, _ = run_trials(
        weather(name, nobody_listening()),
        cassette=Cassette(cassette, CacheMode.REPLAY),
        offline=True,
        concurrency=concurrency,
        after=close_litellm,
    )
    assert errors(replayed) == []
    assert [facts(t) for t in replayed] == [facts(t) for t in recorded]
    assert all(c.replayed for t in replayed for c in t.transcript.model_calls)
    assert (server.connections, len(server.requests)) == (connections, requests)
