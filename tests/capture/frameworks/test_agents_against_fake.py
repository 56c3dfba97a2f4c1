"""Each agent of `weather_agents.py`, run directly (no trialkit) against the fake provider server.

The fake answers every agent with `RoundTrip`: a call of `get_weather`, then a text that
quotes its result. The tests pin what each framework sends (which endpoint, streamed or not,
through which HTTP client module) and the oddities a capture must cope with.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx
import httpx2
import pytest

from tests.capture.frameworks import weather_agents as agents
from tests.fakes.provider_server import ProviderServer, RecordedRequest, RoundTrip
from tests.fakes.provider_wire import Api, tool_results

pytestmark = pytest.mark.filterwarnings(
    # litellm builds pydantic TypeAdapters of ReadOnly TypedDicts when it first sends.
    "ignore:Items? .* using the .ReadOnly. qualifier:UserWarning"
)

ANSWER = "The tool answered: sunny in Paris"

Agent = Callable[[str, str], str | Awaitable[str]]


@dataclass(frozen=True)
class Sends:
    """What an agent's two model calls look like on the wire."""

    agent: Agent
    api: Api
    streamed: bool
    client: str
    """The class whose `send` the call goes through."""


SENDS = {
    "openai_chat": Sends(agents.run_openai_chat, "chat", False, "httpx2.Client"),
    "openai_chat_async": Sends(agents.run_openai_chat_async, "chat", True, "httpx2.AsyncClient"),
    "openai_responses": Sends(agents.run_openai_responses, "responses", True, "httpx2.Client"),
    "openai_responses_async": Sends(
        agents.run_openai_responses_async, "responses", False, "httpx2.AsyncClient"
    ),
    "anthropic": Sends(agents.run_anthropic, "messages", True, "httpx2.Client"),
    "anthropic_async": Sends(agents.run_anthropic_async, "messages", True, "httpx2.AsyncClient"),
    "openai_agents": Sends(agents.run_openai_agents, "responses", False, "httpx2.AsyncClient"),
    "pydantic_ai_openai": Sends(
        agents.run_pydantic_ai_openai, "responses", False, "httpx2.AsyncClient"
    ),
    "pydantic_ai_anthropic": Sends(
        agents.run_pydantic_ai_anthropic, "messages", True, "httpx2.AsyncClient"
    ),
    "langchain_openai": Sends(agents.run_langchain_openai, "chat", False, "httpx2.Client"),
    "litellm_openai": Sends(agents.run_litellm_openai, "chat", False, "httpx.Client"),
    "litellm_anthropic": Sends(agents.run_litellm_anthropic, "messages", True, "httpx.AsyncClient"),
}


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


def run(agent: Agent, server: ProviderServer) -> str:
    """Run a sync agent, or an async one on an event loop of its own."""
    if not inspect.iscoroutinefunction(agent):
        return cast(str, agent("Paris", server.url))
    async_agent = cast(Callable[[str, str], Awaitable[str]], agent)

    async def main() -> str:
        try:
            return await async_agent("Paris", server.url)
        finally:
            # litellm keeps an aiohttp session per event loop, and this loop ends here.
            if "litellm" in sys.modules:
                await sys.modules["litellm"].close_litellm_async_clients()

    return anyio.run(main)


@pytest.mark.parametrize("name", SENDS)
def test_one_tool_round_trip(name: str, server: ProviderServer) -> None:
    sends = SENDS[name]
    assert run(sends.agent, server) == ANSWER
    first, second = server.requests
    assert [(r.api, r.streamed) for r in (first, second)] == [(sends.api, sends.streamed)] * 2
    assert tool_results(sends.api, first.json) == []
    assert tool_results(sends.api, second.json) == ["sunny in Paris"]
    # Both calls on one kept-alive connection, except where litellm streams over aiohttp: the
    # streamed answer's connection goes back to aiohttp's pool only once litellm closes the
    # stream, which it sometimes does after sending the next request (1 CI run in 4 here).
    assert server.connections <= (2 if name == "litellm_anthropic" else 1)


@pytest.mark.parametrize("name", SENDS)
def test_the_http_client_each_framework_sends_through(
    name: str, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    for module in (httpx, httpx2):
        for cls in (module.Client, module.AsyncClient):
            monkeypatch.setattr(
                cls, "send", _noting_send(cls, f"{module.__name__}.{cls.__name__}", sent)
            )
    run(SENDS[name].agent, server)
    assert sent == [SENDS[name].client] * 2


def _noting_send(cls: type[Any], label: str, sent: list[str]) -> Callable[..., Any]:
    original = cls.send
    if inspect.iscoroutinefunction(original):

        async def send_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(label)
            return await original(self, *args, **kwargs)

        return send_async

    def send(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(label)
        return original(self, *args, **kwargs)

    return send


def requests_of(name: str, server: ProviderServer) -> tuple[RecordedRequest, RecordedRequest]:
    run(SENDS[name].agent, server)
    first, second = server.requests
    return first, second


def test_openai_agents_sends_back_the_ids_the_model_gave(server: ProviderServer) -> None:
    first, second = requests_of("openai_agents", server)
    call = second.json["input"][1]
    # The function call goes back with the response item's id: volatile for a real provider.
    assert call["type"] == "function_call" and call["id"].startswith("fc_")
    assert first.json["include"] == [] and "stream" not in first.json
    assert first.headers["user-agent"].startswith("Agents/Python")
    assert first.json["tools"][0]["strict"] is True


def test_pydantic_ai_says_stream_false_and_rewrites_arguments(server: ProviderServer) -> None:
    first, second = requests_of("pydantic_ai_openai", server)
    assert first.json["stream"] is False  # sent explicitly, unlike the plain SDK
    call = second.json["input"][1]
    assert "id" not in call
    assert call["arguments"] == '{"city":"Paris"}'  # re-serialized: not the bytes it received
    assert first.headers["user-agent"].startswith("pydantic-ai/")


def test_pydantic_ai_anthropic_streams_with_a_large_max_tokens(server: ProviderServer) -> None:
    first, second = requests_of("pydantic_ai_anthropic", server)
    assert first.json["stream"] is True and first.json["max_tokens"] >= 4096
    assert first.json["system"][0]["type"] == "text"
    result = second.json["messages"][2]["content"][0]
    assert result["content"] == [{"type": "text", "text": "sunny in Paris"}]
    assert result["is_error"] is False
    assert first.api_key == agents.ANTHROPIC_KEY


def test_langchain_says_stream_false(server: ProviderServer) -> None:
    first, _ = requests_of("langchain_openai", server)
    assert first.json["stream"] is False
    assert first.headers["x-stainless-raw-response"] == "true"


def test_litellm_anthropic_sends_the_key_as_x_api_key(server: ProviderServer) -> None:
    first, _ = requests_of("litellm_anthropic", server)
    assert first.headers["x-api-key"] == agents.ANTHROPIC_KEY
    assert "authorization" not in first.headers
    assert first.headers["user-agent"].startswith("litellm/")
    assert first.json["tools"][0]["type"] == "custom"  # litellm's own addition
    assert "anthropic-version" in first.headers


def test_the_anthropic_sdk_sends_the_key_as_bearer(server: ProviderServer) -> None:
    first, _ = requests_of("anthropic", server)
    assert first.headers["authorization"] == f"Bearer {agents.ANTHROPIC_KEY}"
    assert "x-api-key" not in first.headers
    assert first.headers["x-stainless-helper-method"] == "stream"
