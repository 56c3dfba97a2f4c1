"""Malformed 200 answers, through the real SDKs against the fake provider server: every one is a
`MalformedResponseError` (transient, so retried) whose message says where the body is wrong,
never a raw Python message such as "'NoneType' object has no attribute 'model_extra'"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.fakes.provider_server import ProviderServer, Raw, Reply
from trialkit.models import ErrorKind, ModelRequest, RetryPolicy, get_model
from trialkit.models._convert import MalformedResponseError
from trialkit.models.anthropic import AnthropicModel
from trialkit.models.base import Model
from trialkit.models.context import ModelSettings, use_settings
from trialkit.models.openai import OpenAIModel
from trialkit.transcript import Message, TranscriptRecorder, activate, deactivate

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789-secret"
RAW_PYTHON = ("NoneType", "object has no attribute", "not subscriptable", "not iterable")

_MESSAGE = {"role": "assistant", "content": "Paris."}
OPENAI_BODIES: dict[str, Any] = {
    "empty": {},
    "choices-null": {"choices": None},
    "choices-empty": {"choices": []},
    "choices-string": {"choices": "Paris"},
    "choice-empty": {"choices": [{}]},
    "choice-a-number": {"choices": [3]},
    "message-null": {"choices": [{"message": None}]},
    "message-a-list": {"choices": [{"message": ["Paris."]}]},
    "content-a-number": {"choices": [{"message": {"role": "assistant", "content": 5}}]},
    "content-an-object": {"choices": [{"message": {"content": {"text": "Paris."}}}]},
    "tool-calls-a-string": {"choices": [{"message": {"content": None, "tool_calls": "x"}}]},
    "tool-call-null": {"choices": [{"message": {"tool_calls": [None]}}]},
    "tool-function-null": {
        "choices": [
            {"message": {"tool_calls": [{"id": "1", "type": "function", "function": None}]}}
        ]
    },
    "tool-name-missing": {
        "choices": [{"message": {"tool_calls": [{"id": "1", "function": {"arguments": "{}"}}]}}]
    },
    "finish-reason-a-number": {"choices": [{"message": _MESSAGE, "finish_reason": 1}]},
    "usage-a-string": {"choices": [{"message": _MESSAGE}], "usage": "lots"},
    "usage-tokens-a-string": {"choices": [{"message": _MESSAGE}], "usage": {"prompt_tokens": "9"}},
    "usage-tokens-true": {"choices": [{"message": _MESSAGE}], "usage": {"prompt_tokens": True}},
    "usage-details-a-list": {
        "choices": [{"message": _MESSAGE}],
        "usage": {"prompt_tokens": 1, "prompt_tokens_details": []},
    },
    "a-list": [{"choices": []}],
    "a-string": "Paris.",
    "null": None,
}
ANTHROPIC_BODIES: dict[str, Any] = {
    "empty": {},
    "content-null": {"content": None},
    "content-a-string": {"content": "Paris."},
    "block-null": {"content": [None]},
    "block-without-type": {"content": [{"text": "Paris."}]},
    "text-null": {"content": [{"type": "text", "text": None}]},
    "text-a-number": {"content": [{"type": "text", "text": 5}]},
    "tool-use-no-name": {"content": [{"type": "tool_use", "id": "t1", "input": {}}]},
    "thinking-a-list": {"content": [{"type": "thinking", "thinking": ["x"]}]},
    "stop-reason-a-number": {"content": [], "stop_reason": 3},
    "usage-a-list": {"content": [], "usage": [1]},
    "usage-tokens-a-string": {"content": [], "usage": {"input_tokens": "9"}},
    "a-list": [{"content": []}],
    "a-string": "Paris.",
}


@pytest.fixture
async def openai_model(provider_server: ProviderServer) -> AsyncIterator[OpenAIModel]:
    model = OpenAIModel(
        "gpt-test", base_url=provider_server.openai_base_url, api_key=KEY, timeout=15.0
    )
    yield model
    await model.aclose()


@pytest.fixture
async def anthropic_model(provider_server: ProviderServer) -> AsyncIterator[AnthropicModel]:
    model = AnthropicModel(
        "claude-test", base_url=provider_server.anthropic_base_url, api_key=KEY, timeout=15.0
    )
    yield model
    await model.aclose()


def ask() -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content="Capital of France?")])


async def _malformed(model: Model, server: ProviderServer, body: Any) -> MalformedResponseError:
    server.script(Raw(json.dumps(body).encode()))
    with pytest.raises(MalformedResponseError) as caught:
        await model.generate(ask())
    assert model.classify(caught.value) == (ErrorKind.TRANSIENT, None, None)
    message = str(caught.value)
    assert message.startswith(f"{model.id}: ")
    assert not any(raw in message for raw in RAW_PYTHON), message
    assert "\n" not in message
    return caught.value


@pytest.mark.parametrize("name", sorted(OPENAI_BODIES))
async def test_openai_malformed_answers(
    openai_model: OpenAIModel, provider_server: ProviderServer, name: str
) -> None:
    await _malformed(openai_model, provider_server, OPENAI_BODIES[name])


@pytest.mark.parametrize("name", sorted(ANTHROPIC_BODIES))
async def test_anthropic_malformed_answers(
    anthropic_model: AnthropicModel, provider_server: ProviderServer, name: str
) -> None:
    await _malformed(anthropic_model, provider_server, ANTHROPIC_BODIES[name])


async def test_the_message_says_where_the_body_is_wrong(
    openai_model: OpenAIModel, anthropic_model: AnthropicModel, provider_server: ProviderServer
) -> None:
    cases: list[tuple[Model, Any, str]] = [
        (openai_model, {"choices": [{"message": None}]}, "choices[0].message is null"),
        (openai_model, {}, "choices is missing"),
        (openai_model, {"choices": []}, "choices is an empty list, expected a non-empty list"),
        (openai_model, {"choices": [{"message": {"content": 5}}]}, "message.content is a number"),
        (anthropic_model, {"content": [{"type": "text"}]}, "content[0].text is null"),
        (openai_model, ["Paris."], "the body is a list"),
        (anthropic_model, "Paris.", "the body is a string"),
    ]
    for model, body, where in cases:
        exc = await _malformed(model, provider_server, body)
        assert where in str(exc)
        assert "not an OpenAI chat completion" in str(exc) or "not an Anthropic message" in str(exc)


async def test_well_formed_answers_still_read(
    openai_model: OpenAIModel, anthropic_model: AnthropicModel, provider_server: ProviderServer
) -> None:
    """What servers leave out (usage, ids, finish reasons, a null content) is not malformed."""
    minimal = {"choices": [{"message": {"content": "Paris."}}]}
    provider_server.script(Raw(json.dumps(minimal).encode()))
    assert (await openai_model.generate(ask())).text == "Paris."
    bare = {"content": [{"type": "text", "text": "Paris."}, {"type": "something-new"}]}
    provider_server.script(Raw(json.dumps(bare).encode()))
    assert (await anthropic_model.generate(ask())).text == "Paris."


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_malformed_answer_is_retried(
    provider_server: ProviderServer, provider: str
) -> None:
    body = {"choices": [{"message": None}]} if provider == "openai" else {"content": None}
    provider_server.script(Raw(json.dumps(body).encode()), Reply("Paris."))
    base_url = getattr(provider_server, f"{provider}_base_url")
    managed = get_model(f"{provider}/test", base_url=base_url, api_key=KEY)
    recorder = TranscriptRecorder("task", 0)
    token = activate(recorder)
    try:
        policy = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01, timeout=5.0)
        with use_settings(ModelSettings(retry=policy)):
            response = await managed.generate(ask())
    finally:
        deactivate(token)
        await managed.aclose()
    assert response.text == "Paris."
    (call,) = recorder.transcript.model_calls
    assert call.retries == 1
