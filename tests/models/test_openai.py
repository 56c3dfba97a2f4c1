"""`OpenAIModel` through the real `openai` SDK, against the fake provider server."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import openai
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
    RetryPolicy,
    ToolSpec,
    get_model,
)
from trialkit.models._convert import MalformedResponseError, retry_after_seconds
from trialkit.models.context import ModelSettings, use_settings
from trialkit.models.openai import OpenAIModel
from trialkit.transcript import Message, ToolCall, TranscriptRecorder, Usage, activate, deactivate

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789-secret"
WEATHER = ToolSpec(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
async def model(provider_server: ProviderServer) -> AsyncIterator[OpenAIModel]:
    # Generous: a loaded CI machine can take a while to accept a loopback connection. The
    # timeout itself is tested with a model of its own (`test_slow_answer_...`).
    model = OpenAIModel(
        "gpt-test", base_url=provider_server.openai_base_url, api_key=KEY, timeout=15.0
    )
    yield model
    await model.aclose()


def ask(text: str = "What is the capital of France?", **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)], **fields)


async def failure(model: OpenAIModel, server: ProviderServer, behaviour: Behaviour) -> Exception:
    server.script(behaviour)
    try:
        await model.generate(ask())
    except Exception as exc:
        return exc
    pytest.fail(f"{behaviour} did not fail")


async def test_text_answer(model: OpenAIModel, provider_server: ProviderServer) -> None:
    provider_server.script(Reply("Paris."))
    request = ModelRequest(
        messages=[
            Message(role="system", content="Answer in one word."),
            Message(role="user", content="Capital of France?"),
        ]
    )
    response = await model.generate(request)
    assert response.text == "Paris."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.model == "gpt-test"
    assert response.id == "chatcmpl-fake-1"
    sent = provider_server.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.json == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Capital of France?"},
        ],
    }


_CONFIGS = [
    GenerationConfig(),
    GenerationConfig(
        temperature=0.0, max_tokens=64, top_p=0.5, stop=["END"], seed=3, extra={"top_k": 2}
    ),
]


@pytest.mark.parametrize("config", _CONFIGS)
async def test_the_request_is_the_one_the_sdk_create_sends(
    model: OpenAIModel, provider_server: ProviderServer, config: GenerationConfig
) -> None:
    """The model sends a body it built through the SDK's client (`client.post`): what reaches
    the server is what `chat.completions.create` sends for the same arguments."""
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    await model.generate(
        ModelRequest(
            messages=[
                Message(role="system", content="Be brief."),
                Message(role="user", content="Weather in Oslo?"),
                Message(role="assistant", content="", tool_calls=[call]),
                Message(role="tool", content="sunny", tool_call_id="call_1"),
            ],
            tools=[WEATHER],
            tool_choice=ForceTool(name="get_weather"),
            config=config,
            response_format=ResponseFormat(name="city", json_schema={"type": "object"}),
        )
    )
    ours = provider_server.last_request
    function = {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    settings = config.model_dump(exclude={"extra"}, exclude_none=True)
    sdk = openai.AsyncOpenAI(
        base_url=provider_server.openai_base_url, api_key=KEY, timeout=15.0, max_retries=0
    )
    try:
        await sdk.chat.completions.create(
            model="gpt-test",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Oslo?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
                },
                {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
            ],
            tools=[
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "parameters": WEATHER.parameters,
                        "description": "The weather in a city.",
                    },
                }
            ],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "city", "schema": {"type": "object"}, "strict": True},
            },
            extra_body=config.extra or None,
            **settings,
        )
    finally:
        await sdk.close()
    theirs = provider_server.last_request
    assert (ours.method, ours.path, ours.query) == (theirs.method, theirs.path, theirs.query)
    assert ours.json == theirs.json
    assert ours.headers.keys() == theirs.headers.keys()
    same = {"authorization", "content-type", "accept", "user-agent", "x-stainless-lang"}
    assert {name: ours.headers[name] for name in same} == {
        name: theirs.headers[name] for name in same
    }


async def test_tool_call_round_trip(model: OpenAIModel, provider_server: ProviderServer) -> None:
    provider_server.script(
        Reply(tool_calls=[ToolUse("get_weather", {"city": "Paris"}, id="call_1")]),
        Reply("Sunny in Paris."),
    )
    first = await model.generate(ask("Weather in Paris?", tools=[WEATHER]))
    assert first.finish_reason == "tool_calls"
    assert first.tool_calls == [
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    ]
    assert provider_server.last_request.json["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]

    conversation = [
        Message(role="user", content="Weather in Paris?"),
        first.message,
        Message(role="tool", name="get_weather", tool_call_id="call_1", content="sunny, 24 C"),
    ]
    second = await model.generate(ModelRequest(messages=conversation, tools=[WEATHER]))
    assert second.text == "Sunny in Paris."
    assert provider_server.last_request.json["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "sunny, 24 C", "tool_call_id": "call_1"},
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (ForceTool(name="get_weather"), {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice(
    model: OpenAIModel, provider_server: ProviderServer, choice: Any, wire: Any
) -> None:
    await model.generate(ask(tools=[WEATHER], tool_choice=choice))
    assert provider_server.last_request.json["tool_choice"] == wire


async def test_no_tool_choice_without_tools(
    model: OpenAIModel, provider_server: ProviderServer
) -> None:
    await model.generate(ask(tool_choice="auto"))
    assert "tool_choice" not in provider_server.last_request.json
    assert "tools" not in provider_server.last_request.json


async def test_generation_config(model: OpenAIModel, provider_server: ProviderServer) -> None:
    config = GenerationConfig(
        temperature=0.2, max_tokens=64, top_p=0.9, stop=["\n"], seed=7, extra={"top_k": 5}
    )
    await model.generate(ask(config=config))
    sent = provider_server.last_request.json
    assert {key: sent[key] for key in ("temperature", "max_tokens", "top_p", "stop", "seed")} == {
        "temperature": 0.2,
        "max_tokens": 64,
        "top_p": 0.9,
        "stop": ["\n"],
        "seed": 7,
    }
    assert sent["top_k"] == 5
    assert "max_completion_tokens" not in sent


@pytest.mark.parametrize(
    ("response_format", "wire"),
    [
        (
            ResponseFormat(name="city", json_schema={"type": "object"}),
            {
                "type": "json_schema",
                "json_schema": {"name": "city", "schema": {"type": "object"}, "strict": True},
            },
        ),
        (ResponseFormat(type="json_object"), {"type": "json_object"}),
        (ResponseFormat(), {"type": "json_object"}),  # a schema format with no schema
        (ResponseFormat(type="text"), {"type": "text"}),
    ],
)
async def test_response_format(
    model: OpenAIModel, provider_server: ProviderServer, response_format: ResponseFormat, wire: Any
) -> None:
    await model.generate(ask(response_format=response_format))
    assert provider_server.last_request.json["response_format"] == wire
    assert model.supports_structured_output


async def test_usage_follows_otel_semantics(
    model: OpenAIModel, provider_server: ProviderServer
) -> None:
    provider_server.script(
        Reply(
            "ok",
            usage={
                "prompt_tokens": 1000,
                "completion_tokens": 50,
                "total_tokens": 1050,
                "prompt_tokens_details": {"cached_tokens": 800},
                "completion_tokens_details": {"reasoning_tokens": 20},
            },
        )
    )
    response = await model.generate(ask())
    assert response.usage == Usage(
        input_tokens=1000, output_tokens=50, cache_read_tokens=800, reasoning_tokens=20
    )


async def test_reasoning_content(model: OpenAIModel, provider_server: ProviderServer) -> None:
    provider_server.script(Reply("42", reasoning="6 times 7"))
    response = await model.generate(ask())
    assert response.reasoning == ["6 times 7"]


@pytest.mark.parametrize(
    ("arguments", "parsed"),
    [
        ('{"city": "Par', {"_raw": '{"city": "Par'}),
        ("[1, 2]", {"_raw": "[1, 2]"}),
        ("", {}),
    ],
)
async def test_unreadable_tool_arguments_are_kept(
    model: OpenAIModel, provider_server: ProviderServer, arguments: str, parsed: dict[str, Any]
) -> None:
    provider_server.script(Reply(tool_calls=[ToolUse("get_weather", arguments, id="c")]))
    response = await model.generate(ask(tools=[WEATHER]))
    assert response.tool_calls[0].arguments == parsed


@pytest.mark.parametrize(
    ("wire", "normalised"),
    [("length", "length"), ("content_filter", "content_filter"), ("function_call", "tool_calls")],
)
async def test_finish_reasons(
    model: OpenAIModel, provider_server: ProviderServer, wire: str, normalised: str
) -> None:
    provider_server.script(Reply("cut", finish_reason=wire))
    assert (await model.generate(ask())).finish_reason == normalised


# --- errors -------------------------------------------------------------------------------


async def test_rate_limit_with_retry_after(
    model: OpenAIModel, provider_server: ProviderServer
) -> None:
    exc = await failure(model, provider_server, Fail(429, retry_after=2))
    assert isinstance(exc, openai.RateLimitError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, 2.0, 429)


async def test_retry_after_ms_and_http_date(
    model: OpenAIModel, provider_server: ProviderServer
) -> None:
    exc = await failure(model, provider_server, Fail(429, headers={"retry-after-ms": "1500"}))
    assert model.classify(exc) == (ErrorKind.TRANSIENT, 1.5, 429)
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    exc = await failure(model, provider_server, Fail(503, retry_after=later))
    kind, wait, status = model.classify(exc)
    assert (kind, status) == (ErrorKind.TRANSIENT, 503)
    assert wait is not None and 25 <= wait <= 30


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past: go now
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "inf"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


async def test_out_of_quota_is_permanent(
    model: OpenAIModel, provider_server: ProviderServer
) -> None:
    exc = await failure(model, provider_server, Fail(429, code="insufficient_quota"))
    assert model.classify(exc) == (ErrorKind.PERMANENT, None, 429)


@pytest.mark.parametrize("status", [500, 502, 503, 408, 409])
async def test_server_errors_are_transient(
    model: OpenAIModel, provider_server: ProviderServer, status: int
) -> None:
    exc = await failure(model, provider_server, Fail(status))
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_permanent(
    model: OpenAIModel, provider_server: ProviderServer, status: int
) -> None:
    exc = await failure(model, provider_server, Fail(status, "nope"))
    assert isinstance(exc, openai.APIStatusError)
    assert model.classify(exc) == (ErrorKind.PERMANENT, None, status)


async def test_dropped_connection_is_transient(
    model: OpenAIModel, provider_server: ProviderServer
) -> None:
    exc = await failure(model, provider_server, Drop())
    assert isinstance(exc, openai.APIConnectionError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, None)


@pytest.mark.parametrize(
    "behaviour",
    [malformed(), Raw(b"<html>502 Bad Gateway</html>", content_type="text/html"), Raw(b"{}")],
    ids=["cut-off-json", "html", "no-choices"],
)
async def test_malformed_body_is_transient(
    model: OpenAIModel, provider_server: ProviderServer, behaviour: Behaviour
) -> None:
    exc = await failure(model, provider_server, behaviour)
    assert isinstance(exc, MalformedResponseError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, None)


async def test_slow_answer_times_out_as_transient(provider_server: ProviderServer) -> None:
    model = OpenAIModel(
        "gpt-test", base_url=provider_server.openai_base_url, api_key=KEY, timeout=0.5
    )
    try:
        exc = await failure(model, provider_server, Reply("late", delay=3.0))
    finally:
        await model.aclose()
    assert isinstance(exc, openai.APITimeoutError)
    assert model.classify(exc) == (ErrorKind.TRANSIENT, None, None)


async def test_other_exceptions_fall_back_to_the_base_rules(model: OpenAIModel) -> None:
    assert model.classify(ValueError("bug")) == (ErrorKind.PERMANENT, None, None)
    assert model.classify(ConnectionResetError()) == (ErrorKind.TRANSIENT, None, None)


async def test_a_tool_message_needs_its_call_id(model: OpenAIModel) -> None:
    request = ModelRequest(messages=[Message(role="tool", content="42")])
    with pytest.raises(ValueError, match="tool_call_id"):
        await model.generate(request)


# --- keys, clients, the SDK ---------------------------------------------------------------


async def test_the_key_is_sent_and_never_returned(
    model: OpenAIModel, provider_server: ProviderServer
) -> None:
    response = await model.generate(ask())
    assert provider_server.last_request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in response.model_dump_json()
    assert KEY not in repr(model)
    exc = await failure(model, provider_server, Fail(401, "Incorrect API key provided"))
    assert KEY not in str(exc)


async def test_keys_and_base_url_from_the_environment(
    provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", provider_server.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = OpenAIModel("gpt-test")
    try:
        await model.generate(ask())
    finally:
        await model.aclose()
    assert provider_server.last_request.api_key == "sk-from-env"


async def test_a_local_server_gets_a_placeholder_key(
    provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIModel("llama", base_url=provider_server.openai_base_url)
    try:
        await model.generate(ask())
    finally:
        await model.aclose()
    assert provider_server.last_request.api_key == "trialkit-no-key"


async def test_a_client_passed_in_stays_open(provider_server: ProviderServer) -> None:
    client = openai.AsyncOpenAI(base_url=provider_server.openai_base_url, api_key=KEY)
    model = OpenAIModel("gpt-test", client=client)
    try:
        assert (await model.generate(ask("hello"))).text == "hello"
        await model.aclose()
        assert not client.is_closed()
    finally:
        await client.close()


async def test_aclose_closes_the_client_it_made(model: OpenAIModel) -> None:
    client = model.client
    await model.aclose()
    assert client.is_closed()


def test_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    message = "openai/gpt-4o-mini: the OpenAI SDK is not installed; pip install 'trialkit[openai]'"
    with pytest.raises(ImportError, match=re.escape(message)):
        OpenAIModel("gpt-4o-mini")


def test_importing_the_module_does_not_import_the_sdk() -> None:
    code = "import sys, trialkit.models.openai; assert 'openai' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_key_is_needed_to_name_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIModel("gpt-4o-mini").id == "openai/gpt-4o-mini"


# --- through get_model: retries and the transcript ----------------------------------------


async def test_managed_calls_retry_and_record_no_secret(provider_server: ProviderServer) -> None:
    provider_server.script(Fail(503), Drop(), Fail(429, retry_after=0.01), Reply("Paris."))
    managed = get_model("openai/gpt-test", base_url=provider_server.openai_base_url, api_key=KEY)
    recorder = TranscriptRecorder("task", 0)
    token = activate(recorder)
    try:
        policy = RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.01, timeout=2.0)
        with use_settings(ModelSettings(retry=policy)):
            response = await managed.generate(ask())
    finally:
        deactivate(token)
        await managed.aclose()
    assert response.text == "Paris."
    assert provider_server.request_count == 4
    (call,) = recorder.transcript.model_calls
    assert call.retries == 3
    assert KEY not in recorder.transcript.model_dump_json()


async def test_clients_stop_at_the_cap_and_the_least_busy_takes_the_rest() -> None:
    from trialkit.models.openai import MAX_CLIENTS, REQUESTS_PER_CLIENT

    model = OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    try:
        full = REQUESTS_PER_CLIENT * MAX_CLIENTS
        leased = [model._lease() for _ in range(full)]
        assert len(model._in_flight) == MAX_CLIENTS  # a new client only when all are full
        assert model._in_flight == [REQUESTS_PER_CLIENT] * MAX_CLIENTS
        model._in_flight[3] -= 2  # two of the fourth client's requests are answered
        assert [model._lease(), model._lease(), model._lease()] == [3, 3, 0]
        assert len(model._in_flight) == MAX_CLIENTS  # past the cap: the least busy shares
        assert leased[:REQUESTS_PER_CLIENT] == [0] * REQUESTS_PER_CLIENT
    finally:
        await model.aclose()


async def test_high_concurrency_spreads_over_several_clients(
    provider_server: ProviderServer,
) -> None:
    import anyio

    from trialkit.models.openai import MAX_CLIENTS, REQUESTS_PER_CLIENT

    model = OpenAIModel("gpt-test", base_url=provider_server.openai_base_url, api_key=KEY)
    provider_server.latency = 0.2  # answers arrive after every request went out
    try:
        answers: list[str] = []
        one_at_a_time = [await model.generate(ask(f"solo {i}")) for i in range(3)]
        assert len(model._in_flight) == 1  # no need for a second client
        async with anyio.create_task_group() as tg:
            for i in range(REQUESTS_PER_CLIENT * 2 + 5):

                async def one(i: int = i) -> None:
                    answers.append((await model.generate(ask(f"echo {i}"))).text)

                tg.start_soon(one)
        assert [r.text for r in one_at_a_time] == [f"solo {i}" for i in range(3)]
        assert sorted(answers) == sorted(f"echo {i}" for i in range(REQUESTS_PER_CLIENT * 2 + 5))
        assert 3 <= len(model._in_flight) <= MAX_CLIENTS
        assert model._in_flight == [0] * len(model._in_flight)  # every lease returned
        clients = [model.client, *model._more]
        # One SSL context for all of them (the CA bundle is read once, not once a client).
        pools = [client._client._transport._pool for client in clients]  # httpx2's own
        assert model._ssl and all(pool._ssl_context is model._ssl for pool in pools)
    finally:
        provider_server.latency = 0.0
        await model.aclose()
    assert all(client.is_closed() for client in clients)
