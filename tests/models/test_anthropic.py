"""`AnthropicModel` through the real `anthropic` SDK, against the fake provider server."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.fakes.provider_server import (
    Behaviour,
    Drop,
    Fail,
    ProviderServer,
    Raw,
    Reply,
    ToolUse,
    malformed,
)
from trialkit.models import (
    ErrorKind,
    ForceTool,
    GenerationConfig,
    ModelRequest,
    ResponseFormat,
    ToolSpec,
)
from trialkit.models._convert import MalformedResponseError
from trialkit.models.anthropic import AnthropicModel
from trialkit.transcript import Message, ToolCall, Usage

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-0123456789-secret"
WEATHER = ToolSpec(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
async def model(provider_server: ProviderServer) -> AsyncIterator[AnthropicModel]:
    # Generous: a loaded CI machine can take a while to accept a loopback connection. The
    # timeout itself is tested with a model of its own (`test_slow_answer_...`).
    model = AnthropicModel(
        "claude-test", base_url=provider_server.anthropic_base_url, api_key=KEY, timeout=15.0
    )
    yield model
    await model.aclose()


def ask(text: str = "What is the capital of France?", **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)], **fields)


async def failure(model: AnthropicModel, server: ProviderServer, behaviour: Behaviour) -> Exception:
    server.script(behaviour)
    try:
        await model.generate(ask())
    except Exception as exc:
        return exc
    pytest.fail(f"{behaviour} did not fail")


async def test_text_answer(model: AnthropicModel, provider_server: ProviderServer) -> None:
    provider_server.script(Reply("Paris."))
    request = ModelRequest(
        messages=[
            Message(role="system", content="Answer in one word."),
            Message(role="system", content="Be polite."),
            Message(role="user", content="Capital of France?"),
        ]
    )
    response = await model.generate(request)
    assert response.text == "Paris."
    assert response.finish_reason == "stop"
    assert response.model == "claude-test"
    assert response.id == "msg_fake_1"
    sent = provider_server.last_request
    assert sent.path == "/v1/messages"
    assert "anthropic-version" in sent.headers
    assert sent.json == {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "Answer in one word.\n\nBe polite.",
        "messages": [{"role": "user", "content": "Capital of France?"}],
    }


async def test_tool_call_round_trip(model: AnthropicModel, provider_server: ProviderServer) -> None:
    provider_server.script(
        Reply(
            "Let me look.",
            tool_calls=[
                ToolUse("get_weather", {"city": "Paris"}, id="toolu_1"),
                ToolUse("get_weather", {"city": "Oslo"}, id="toolu_2"),
            ],
        ),
        Reply("Sunny in Paris, snow in Oslo."),
    )
    first = await model.generate(ask("Weather in Paris and Oslo?", tools=[WEATHER]))
    assert first.finish_reason == "tool_calls"
    assert first.text == "Let me look."
    assert first.tool_calls == [
        ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
        ToolCall(id="toolu_2", name="get_weather", arguments={"city": "Oslo"}),
    ]
    assert provider_server.last_request.json["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]

    assistant = first.message.model_copy(deep=True)
    assistant.tool_calls[1].is_error = True
    conversation = [
        Message(role="user", content="Weather in Paris and Oslo?"),
        assistant,
        Message(role="tool", name="get_weather", tool_call_id="toolu_1", content="sunny"),
        Message(role="tool", name="get_weather", tool_call_id="toolu_2", content="no station"),
        Message(role="user", content="And tomorrow?"),
    ]
    second = await model.generate(ModelRequest(messages=conversation, tools=[WEATHER]))
    assert second.text == "Sunny in Paris, snow in Oslo."
    assert provider_server.last_request.json["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no station",
                    "is_error": True,
                },
            ],
        },
        {"role": "user", "content": "And tomorrow?"},
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        (ForceTool(name="get_weather"), {"type": "tool", "name": "get_weather"}),
    ],
)
async def test_tool_choice(
    model: AnthropicModel, provider_server: ProviderServer, choice: Any, wire: Any
) -> None:
    await model.generate(ask(tools=[WEATHER], tool_choice=choice))
    assert provider_server.last_request.json["tool_choice"] == wire


async def test_generation_config(model: AnthropicModel, provider_server: ProviderServer) -> None:
    config = GenerationConfig(
        temperature=0.2, max_tokens=64, top_p=0.9, stop=["\n"], seed=7, extra={"top_k": 5}
    )
    schema = ResponseFormat(name="city", json_schema={"type": "object"})
    await model.generate(ask(config=config, response_format=schema))
    sent = provider_server.last_request.json
    assert sent["max_tokens"] == 64
    assert sent["stop_sequences"] == ["\n"]
    assert sent["top_k"] == 5
    for left_out in ("temperature", "top_p", "seed", "response_format", "output_config"):
        assert left_out not in sent
    assert not model.supports_structured_output


async def test_usage_adds_cache_tokens_back_into_input(
    model: AnthropicModel, provider_server: ProviderServer
) -> None:
    provider_server.script(
        Reply(
            "ok",
            usage={
                "input_tokens": 100,
                "output_tokens": 50,
                "cache_read_input_tokens": 800,
                "cache_creation_input_tokens": 200,
                "output_tokens_details": {"thinking_tokens": 30},
            },
        )
    )
    response = await model.generate(ask())
    assert response.usage == Usage(
        input_tokens=1100,
        output_tokens=50,
        cache_read_tokens=800,
        cache_write_tokens=200,
        reasoning_tokens=30,
    )


async def test_usage_without_cache_fields(
    model: AnthropicModel, provider_server: ProviderServer
) -> None:
    provider_server.script(Reply("ok", usage={"input_tokens": 12, "output_tokens": 3}))
    response = await model.generate(ask())
    assert response.usage == Usage(input_tokens=12, output_tokens=3)


async def test_thinking_blocks_become_reasoning(
    model: AnthropicModel, provider_server: ProviderServer
) -> None:
    provider_server.script(Reply("42", reasoning="6 times 7"))
    response = await model.generate(ask())
    assert (response.text, response.reasoning) == ("42", ["6 times 7"])


@pytest.mark.parametrize(
    ("wire", "normalised"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
async def test_stop_reasons(
    model: AnthropicModel, provider_server: ProviderServer, wire: str, normalised: str
) -> None:
    provider_server.script(Reply("cut", finish_reason=wire))
    assert (await model.generate(ask())).finish_reason == normalised


# --- errors -------------------------------------------------------------------------------


async def test_rate_limit_with_retry_after(
    model: AnthropicModel, provider_server: ProviderServer
) -> None:
    exc = await failure(model, provider_server, Fail(429, retry_after=2))
    assert isinstance(exc, anthropic.RateLimitError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, 2.0, 429)


@pytest.mark.parametrize("status", [500, 503, 529, 408, 409])
async def test_server_errors_and_overload_are_transient(
    model: AnthropicModel, provider_server: ProviderServer, status: int
) -> None:
    exc = await failure(model, provider_server, Fail(status))
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_permanent(
    model: AnthropicModel, provider_server: ProviderServer, status: int
) -> None:
    exc = await failure(model, provider_server, Fail(status, "nope"))
    assert isinstance(exc, anthropic.APIStatusError)
    assert model.classify(exc) == (ErrorKind.PERMANENT, None, status)


async def test_dropped_connection_is_transient(
    model: AnthropicModel, provider_server: ProviderServer
) -> None:
    exc = await failure(model, provider_server, Drop())
    assert isinstance(exc, anthropic.APIConnectionError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, None)


@pytest.mark.parametrize(
    "behaviour",
    [malformed(), Raw(b"<html>502 Bad Gateway</html>", content_type="text/html"), Raw(b"{}")],
    ids=["cut-off-json", "html", "no-content"],
)
async def test_malformed_body_is_transient(
    model: AnthropicModel, provider_server: ProviderServer, behaviour: Behaviour
) -> None:
    exc = await failure(model, provider_server, behaviour)
    assert isinstance(exc, MalformedResponseError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, None)


async def test_slow_answer_times_out_as_transient(provider_server: ProviderServer) -> None:
    model = AnthropicModel(
        "claude-test", base_url=provider_server.anthropic_base_url, api_key=KEY, timeout=0.5
    )
    try:
        exc = await failure(model, provider_server, Reply("late", delay=3.0))
    finally:
        await model.aclose()
    assert isinstance(exc, anthropic.APITimeoutError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, None)


# --- keys, clients, the SDK ---------------------------------------------------------------


async def test_the_key_is_sent_and_never_returned(
    model: AnthropicModel, provider_server: ProviderServer
) -> None:
    response = await model.generate(ask())
    assert provider_server.last_request.api_key == KEY
    assert KEY not in response.model_dump_json()
    assert KEY not in repr(model)


async def test_keys_and_base_url_from_the_environment(
    provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", provider_server.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    model = AnthropicModel("claude-test")
    try:
        await model.generate(ask())
    finally:
        await model.aclose()
    assert provider_server.last_request.api_key == "sk-ant-from-env"


async def test_a_local_server_gets_a_placeholder_key(
    provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = AnthropicModel("claude-test", base_url=provider_server.anthropic_base_url)
    try:
        await model.generate(ask())
    finally:
        await model.aclose()
    assert provider_server.last_request.api_key == "trialkit-no-key"


async def test_a_bearer_token_from_the_environment_is_sent_not_the_placeholder(
    provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
    model = AnthropicModel("claude-test", base_url=provider_server.anthropic_base_url)
    try:
        await model.generate(ask())
    finally:
        await model.aclose()
    sent = provider_server.last_request.headers.get("authorization")
    assert sent == "Bearer token-from-the-environment"
    assert provider_server.last_request.headers.get("x-api-key") is None


async def test_aclose_closes_the_client_it_made(model: AnthropicModel) -> None:
    client = model.client
    await model.aclose()
    assert client.is_closed()


def test_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    message = (
        "anthropic/claude-sonnet-4-5: the Anthropic SDK is not installed; "
        "pip install 'trialkit[anthropic]'"
    )
    with pytest.raises(ImportError, match=re.escape(message)):
        AnthropicModel("claude-sonnet-4-5")


def test_importing_the_module_does_not_import_the_sdk() -> None:
    code = "import sys, trialkit.models.anthropic; assert 'anthropic' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
