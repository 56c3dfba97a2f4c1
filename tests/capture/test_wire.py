"""The model APIs' wire formats (`trialkit.capture.wire`): requests, answers, streams.

Payloads are the shapes the APIs send; where the installed SDKs define them, each payload is
validated by the SDK's own types first, so a typo in a fixture fails here rather than
passing against a shape no server sends.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from trialkit.capture import wire
from trialkit.capture.wire import StreamAssembler, WireError
from trialkit.transcript import Usage

# --- helpers ---------------------------------------------------------------------------------

_RESPONSES_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
_MESSAGES_EVENT: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)


def sse(*events: dict[str, Any] | str, named: bool = False) -> bytes:
    """An SSE body: each event a `data:` line (a string as it is, an object as JSON), with an
    `event:` line first when `named`."""
    out = []
    for event in events:
        if isinstance(event, str):
            out.append(f"data: {event}\n\n")
            continue
        kind = event.get("type")
        name = f"event: {kind}\n" if named and isinstance(kind, str) else ""
        out.append(f"{name}data: {json.dumps(event, ensure_ascii=False)}\n\n")
    return "".join(out).encode()


def assemble(api: wire.Api, body: bytes, size: int | None = None) -> StreamAssembler:
    assembler = StreamAssembler(api)
    step = size or len(body) or 1
    for start in range(0, len(body), step):
        assembler.feed(body[start : start + step])
    return assembler


def dumped(assembler: StreamAssembler) -> dict[str, Any]:
    return wire.dump_response(assembler.result())


def calls(response: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [(call.id, call.name, call.arguments) for call in response.tool_calls]


def test_public_names() -> None:
    names = """Api StreamAssembler VOLATILE VOLATILE_INPUT_ITEM VOLATILE_METADATA WireError
    dump_response error_message error_text key_body model_of parse_json provider_of recognise
    usage_of wants_stream"""
    assert sorted(wire.__all__) == names.split()


# --- recognise, provider_of -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1/chat/completions", "chat"),
        ("/chat/completions", "chat"),
        ("/v1/chat/completions/", "chat"),
        ("/openai/deployments/x/chat/completions", "chat"),
        ("/api/v1//chat/completions", "chat"),
        ("/v1/responses", "responses"),
        ("/backend-api/codex/responses", "responses"),
        ("/v1/messages", "messages"),
        ("/run/abc/v1/messages", "messages"),
        ("/v1/messages?beta=true", "messages"),
        ("/v1/embeddings", "embeddings"),
        ("/openai/deployments/e/embeddings/", "embeddings"),
    ],
)
def test_recognise_model_calls(path: str, api: str) -> None:
    assert wire.recognise("POST", path) == api
    assert wire.recognise("post", path) == api


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/chat/completions"),
        ("GET", "/v1/responses/resp_1"),
        ("HEAD", "/"),
        ("POST", "/v1/responses/resp_1"),
        ("POST", "/v1/responses/resp_1/cancel"),
        ("POST", "/v1/responses/input_tokens"),
        ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v1/messages/batches"),
        ("POST", "/v1/messages/batches/b1/cancel"),
        ("POST", "/v1/models"),
        ("POST", "/v1/chat/completions/chatcmpl-1"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/threads/thread_1/messages"),
        ("POST", "/"),
        ("POST", ""),
    ],
)
def test_recognise_other_requests(method: str, path: str) -> None:
    assert wire.recognise(method, path) is None


def test_provider_of() -> None:
    assert wire.provider_of("messages") == "anthropic"
    assert [wire.provider_of(api) for api in ("chat", "responses", "embeddings")] == ["openai"] * 3


# --- request bodies -------------------------------------------------------------------------


def test_key_body_drops_exactly_the_volatile_fields() -> None:
    body = {
        "model": "gpt-5.5",
        "stream": True,
        "stream_options": {"include_usage": True},
        "prompt_cache_key": "session-1",
        "user": "u-1",
        "safety_identifier": "s-1",
        "client_metadata": {"run": "r-1"},
        "metadata": {"user_id": '{"session_id": "abc"}', "team": "evals"},
        "input": [
            {"type": "message", "id": "msg_1", "role": "user", "content": "hi"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"},
            {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "x"},
            {"type": "item_reference", "id": "rs_9"},
            {"role": "user", "content": "no type, no id"},
            "not an item",
        ],
    }
    before = copy.deepcopy(body)

    key = wire.key_body("responses", body)

    assert body == before
    assert key == {
        "model": "gpt-5.5",
        "stream": True,
        "stream_options": {"include_usage": True},
        "metadata": {"team": "evals"},
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "call_1", "name": "f"},
            {"type": "function_call_output", "call_id": "call_1", "output": "x"},
            {"type": "item_reference", "id": "rs_9"},
            {"role": "user", "content": "no type, no id"},
            "not an item",
        ],
    }


def test_key_body_metadata() -> None:
    claude_code = {"model": "m", "metadata": {"user_id": '{"session_id": "s"}'}, "messages": []}
    assert wire.key_body("messages", claude_code) == {"model": "m", "messages": []}
    assert claude_code["metadata"] == {"user_id": '{"session_id": "s"}'}
    kept = {"model": "m", "metadata": {}}
    assert wire.key_body("messages", kept) == kept
    odd = {"model": "m", "metadata": "not an object"}
    assert wire.key_body("chat", odd) == odd


def test_key_body_keeps_item_ids_outside_the_responses_api() -> None:
    body = {"model": "e", "input": [{"id": "x"}]}
    assert wire.key_body("embeddings", body) == body
    assert wire.key_body("responses", {"model": "m", "input": "a string"})["input"] == "a string"


def test_model_of_and_wants_stream() -> None:
    assert wire.model_of({"model": "gpt-4o"}) == "gpt-4o"
    assert [wire.model_of({"model": m}) for m in ("", None, 3, ["x"])] == [None] * 4
    assert wire.model_of({}) is None
    assert wire.wants_stream({"stream": True})
    assert not any(wire.wants_stream({"stream": s}) for s in (False, "true", 1, None))
    assert not wire.wants_stream({})


# --- usage ----------------------------------------------------------------------------------


def test_usage_of_each_api() -> None:
    chat = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    assert wire.usage_of("chat", chat) == Usage(
        input_tokens=120, output_tokens=30, cache_read_tokens=100, reasoning_tokens=12
    )
    responses = {
        "input_tokens": 2000,
        "input_tokens_details": {"cached_tokens": 1500, "cache_write_tokens": 300},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 200},
        "total_tokens": 2300,
    }
    assert wire.usage_of("responses", responses) == Usage(
        input_tokens=2000,
        output_tokens=300,
        cache_read_tokens=1500,
        cache_write_tokens=300,
        reasoning_tokens=200,
    )
    assert wire.usage_of("embeddings", {"prompt_tokens": 8, "total_tokens": 8}) == Usage(
        input_tokens=8
    )
    assert wire.usage_of("embeddings", {"total_tokens": 5}) == Usage(input_tokens=5)


def test_usage_of_anthropic_adds_the_cache_back_into_input() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
        "output_tokens": 42,
        "output_tokens_details": {"thinking_tokens": 7},
    }
    assert wire.usage_of("messages", usage) == Usage(
        input_tokens=115,
        output_tokens=42,
        cache_read_tokens=100,
        cache_write_tokens=5,
        reasoning_tokens=7,
    )
    nulls = {"input_tokens": 10, "cache_read_input_tokens": None, "output_tokens": 1}
    assert wire.usage_of("messages", nulls) == Usage(input_tokens=10, output_tokens=1)


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "embeddings"])
@pytest.mark.parametrize(
    "usage",
    [
        None,
        {},
        [],
        "12",
        7,
        {"prompt_tokens": True, "input_tokens": True, "output_tokens": False},
        {"prompt_tokens": "12", "input_tokens": 1.5, "completion_tokens": -3},
        {"prompt_tokens_details": "x", "input_tokens_details": [1], "output_tokens_details": 3},
        {"cache_read_input_tokens": True, "cache_creation_input_tokens": {"n": 1}},
    ],
)
def test_usage_of_odd_values_count_zero(api: wire.Api, usage: object) -> None:
    assert wire.usage_of(api, usage) == Usage()


# --- non-streamed answers -------------------------------------------------------------------


def chat_completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> Any:
    data = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": 50,
            "completion_tokens": 20,
            "total_tokens": 70,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
        **extra,
    }
    return ChatCompletion.model_validate(data).model_dump(mode="json")  # with the API's nulls


def test_parse_chat_text() -> None:
    data = chat_completion({"role": "assistant", "content": "Paris."})
    response = wire.parse_json("chat", data)
    assert response.text == "Paris."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=50, output_tokens=20)
    assert (response.model, response.id) == ("gpt-4o-mini-2024-07-18", "chatcmpl-1")
    assert response.reasoning == []


def test_parse_chat_tool_calls() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "broken", "arguments": "{"}},
            {"id": "call_3", "type": "function", "function": {"name": "none", "arguments": ""}},
            {"id": "call_4", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}},
        ],
    }
    response = wire.parse_json("chat", chat_completion(message, "tool_calls"))
    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert calls(response) == [
        ("call_1", "read", {"path": "a.txt"}),
        ("call_2", "broken", {"_raw": "{"}),
        ("call_3", "none", {}),
        ("call_4", "patch", {"input": "*** Begin"}),
    ]


def test_parse_chat_servers_variants() -> None:
    """Reasoning text (DeepSeek, vLLM), list content, refusals, arguments as an object, no
    call id, the legacy `function_call`, a finish reason normalised."""
    data = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "4"}, {"type": "image", "url": "x"}],
                    "reasoning_content": "2 + 2",
                    "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}],
                },
                "finish_reason": "function_call",
            }
        ]
    }
    response = wire.parse_json("chat", data)
    assert (response.text, response.reasoning) == ("4", ["2 + 2"])
    assert calls(response) == [("call_0", "f", {"a": 1})]
    assert response.finish_reason == "tool_calls"
    assert (response.model, response.id, response.usage) == (None, None, Usage())

    legacy = {"role": "assistant", "function_call": {"name": "g", "arguments": '{"b": 2}'}}
    assert calls(wire.parse_json("chat", {"choices": [{"message": legacy}]})) == [
        ("call_0", "g", {"b": 2})
    ]
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    response = wire.parse_json("chat", chat_completion(refusal, "content_filter"))
    assert (response.text, response.finish_reason) == ("I can't help with that.", "content_filter")
    vllm = {"role": "assistant", "content": "ok", "reasoning": "thought"}
    assert wire.parse_json("chat", {"choices": [{"message": vllm}]}).reasoning == ["thought"]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([1], "the body is a list, expected an object"),
        ("text", "the body is a string"),
        ({"object": "list", "data": []}, "choices is missing"),
        ({"choices": []}, "choices is an empty list, expected a non-empty list"),
        ({"choices": [{"message": "hi"}]}, "choices[0].message is a string"),
        ({"choices": [{"message": {"content": 3}}]}, "choices[0].message.content is a number"),
        (
            {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"name": 1}}]}}]},
            "choices[0].message.tool_calls[0].function.name is a number",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"type": "custom"}]}}]},
            "choices[0].message.tool_calls[0].custom is missing",
        ),
    ],
)
def test_parse_chat_refuses_what_is_not_a_completion(data: object, problem: str) -> None:
    with pytest.raises(WireError, match="not an OpenAI chat completion") as caught:
        wire.parse_json("chat", data)
    assert problem in str(caught.value)


def response_object(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    data = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "model": "gpt-5.5",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 2000,
            "input_tokens_details": {"cached_tokens": 1500, "cache_write_tokens": 0},
            "output_tokens": 300,
            "output_tokens_details": {"reasoning_tokens": 200},
            "total_tokens": 2300,
        },
        **extra,
    }
    Response.model_validate(data)
    return data


REASONING_ITEM = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Thinking about it."}],
}
MESSAGE_ITEM = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Hello, world", "annotations": []}],
}
CALL_ITEM = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_1",
    "name": "shell",
    "arguments": '{"cmd": ["ls"]}',
    "status": "completed",
}
PATCH_ITEM = {
    "id": "ctc_1",
    "type": "custom_tool_call",
    "call_id": "call_2",
    "name": "apply_patch",
    "input": "*** Begin Patch\n*** End Patch",
}


def test_parse_responses() -> None:
    data = response_object([REASONING_ITEM, MESSAGE_ITEM, CALL_ITEM, PATCH_ITEM])
    response = wire.parse_json("responses", data)
    assert response.text == "Hello, world"
    assert response.reasoning == ["Thinking about it."]
    assert calls(response) == [
        ("call_1", "shell", {"cmd": ["ls"]}),
        ("call_2", "apply_patch", {"input": "*** Begin Patch\n*** End Patch"}),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(
        input_tokens=2000, output_tokens=300, cache_read_tokens=1500, reasoning_tokens=200
    )
    assert (response.model, response.id) == ("gpt-5.5", "resp_1")


def test_parse_responses_finish_reasons() -> None:
    assert wire.parse_json("responses", response_object([MESSAGE_ITEM])).finish_reason == "stop"
    cut = response_object(
        [MESSAGE_ITEM], status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    assert wire.parse_json("responses", cut).finish_reason == "length"
    filtered = {**cut, "incomplete_details": {"reason": "content_filter"}}
    assert wire.parse_json("responses", filtered).finish_reason == "content_filter"
    assert wire.parse_json("responses", {**cut, "incomplete_details": None}).finish_reason == (
        "incomplete"
    )
    assert wire.parse_json("responses", {"output": []}).finish_reason is None
    assert wire.parse_json("responses", {"output": [], "status": "failed"}).finish_reason == (
        "failed"
    )


def test_parse_responses_other_items() -> None:
    """Reasoning given as content only (open-weight models), a refusal, built-in tools the
    client runs, and server-side tools (not tool calls of the agent)."""
    output: list[dict[str, Any]] = [
        {"id": "rs_2", "type": "reasoning", "summary": [], "content": [
            {"type": "reasoning_text", "text": "raw thoughts"}]},
        {"id": "msg_2", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "refusal", "refusal": "No."}]},
        {"id": "sh_1", "type": "shell_call", "call_id": "call_9", "status": "completed",
         "action": {"commands": ["ls -la"]}},
        {"id": "ws_1", "type": "web_search_call", "status": "completed",
         "action": {"type": "search", "query": "q"}},
    ]  # fmt: skip
    response = wire.parse_json("responses", response_object(output))
    assert response.reasoning == ["raw thoughts"]
    assert response.text == "No."
    assert calls(response) == [("call_9", "shell", {"commands": ["ls -la"]})]


def test_parse_odd_arguments() -> None:
    deep = "[" * 100_000
    function = {"name": "f", "arguments": deep}
    message = {"tool_calls": [{"id": "c", "type": "function", "function": function}]}
    assert calls(wire.parse_json("chat", {"choices": [{"message": message}]})) == [
        ("c", "f", {"_raw": deep})
    ]
    output = [
        {"type": "local_shell_call", "call_id": "c1", "action": None},
        {"type": "computer_call", "call_id": "c2", "action": ["click"]},
    ]
    assert calls(wire.parse_json("responses", {"output": output})) == [
        ("c1", "local_shell", {}),
        ("c2", "computer", {"_raw": ["click"]}),
    ]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"id": "resp_1"}, "output is missing"),
        ({"output": {}}, "output is an object, expected a list"),
        ({"output": [{"id": "x"}]}, "output[0].type is null"),
        ({"output": [{"type": "function_call", "call_id": "c"}]}, "output[0].name is null"),
        ({"output": [{"type": "message", "content": "hi"}]}, "output[0].content is a string"),
    ],
)
def test_parse_responses_refuses_what_is_not_a_response(data: object, problem: str) -> None:
    with pytest.raises(WireError, match="not an OpenAI response") as caught:
        wire.parse_json("responses", data)
    assert problem in str(caught.value)


def anthropic_message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    data = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 5,
            "output_tokens": 42,
        },
    }
    AnthropicMessage.model_validate(data)
    return data


def test_parse_messages() -> None:
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "I'll write it."},
        {"type": "tool_use", "id": "toolu_1", "name": "Write",
         "input": {"file_path": "a.md", "content": "# A"}},
    ]  # fmt: skip
    response = wire.parse_json("messages", anthropic_message(content, "tool_use"))
    assert response.text == "I'll write it."
    assert response.reasoning == ["Let me look."]
    assert calls(response) == [("toolu_1", "Write", {"file_path": "a.md", "content": "# A"})]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(
        input_tokens=115, output_tokens=42, cache_read_tokens=100, cache_write_tokens=5
    )
    assert (response.model, response.id) == ("claude-sonnet-4-5", "msg_01")


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
def test_parse_messages_stop_reasons(stop: str, finish: str) -> None:
    content = [{"type": "text", "text": "x"}]
    assert wire.parse_json("messages", anthropic_message(content, stop)).finish_reason == finish


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"type": "error", "error": {"type": "x", "message": "y"}}, "content is missing"),
        ({"content": [{"text": "x"}]}, "content[0].type is null"),
        ({"content": [{"type": "text"}]}, "content[0].text is null"),
        ({"content": [{"type": "tool_use", "id": "t", "name": None}]}, "content[0].name is null"),
    ],
)
def test_parse_messages_refuses_what_is_not_a_message(data: object, problem: str) -> None:
    with pytest.raises(WireError, match="not an Anthropic message") as caught:
        wire.parse_json("messages", data)
    assert problem in str(caught.value)


def test_parse_embeddings() -> None:
    data = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, -0.2]}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 8, "total_tokens": 8},
    }
    CreateEmbeddingResponse.model_validate(data)
    response = wire.parse_json("embeddings", data)
    assert response.message.role == "assistant"
    assert (response.text, response.tool_calls, response.finish_reason) == ("", [], None)
    assert response.usage == Usage(input_tokens=8)
    assert response.model == "text-embedding-3-small"
    with pytest.raises(WireError, match="data is missing"):
        wire.parse_json("embeddings", {"object": "list"})


def test_dump_response_leaves_out_defaults() -> None:
    response = wire.parse_json("chat", {"choices": [{"message": {"content": "hi"}}]})
    assert wire.dump_response(response) == {"message": {"role": "assistant", "content": "hi"}}


# --- error answers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (
            {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate"}},
            "HTTP 429: Rate limit reached",
        ),
        (
            {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}},
            "HTTP 429: Slow down",
        ),
        ({"error": {"message": "", "code": "insufficient_quota"}}, "HTTP 429: insufficient_quota"),
        ({"error": "Too many\nrequests"}, "HTTP 429: Too many requests"),
        ({"object": "error", "message": "vLLM says no"}, "HTTP 429: vLLM says no"),
        ({"detail": "Not Found"}, "HTTP 429: Not Found"),
        ({"detail": [{"loc": ["body"], "msg": "x"}]}, "HTTP 429"),
        ("upstream connect error", "HTTP 429: upstream connect error"),
        ("<html><body>Bad gateway</body></html>", "HTTP 429"),
        ({"error": {"message": None}}, "HTTP 429"),
        ({"error": None}, "HTTP 429"),
        (None, "HTTP 429"),
        ([], "HTTP 429"),
        (b"raw", "HTTP 429"),
        ("   ", "HTTP 429"),
    ],
)
def test_error_text(data: object, text: str) -> None:
    assert wire.error_text("chat", 429, data) == text


def test_error_text_is_one_short_line() -> None:
    text = wire.error_text("messages", 400, {"error": {"message": "word " * 500}})
    assert "\n" not in text
    assert len(text) < 320
    assert text.endswith("…")


# --- streams: Chat Completions ----------------------------------------------------------------


def chat_chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choices = [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
    data = {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_1",
        "choices": choices,
        "usage": None,
        **extra,
    }
    ChatCompletionChunk.model_validate(data)
    return data


def tool_delta(index: int, arguments: str, **start: str) -> dict[str, Any]:
    function = {"arguments": arguments} | ({"name": start["name"]} if start else {})
    call = {"index": index, "function": function}
    if start:
        call |= {"id": start["id"], "type": "function"}
    return {"tool_calls": [call]}


CHAT_USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "total_tokens": 150,
    "prompt_tokens_details": {"cached_tokens": 100},
    "completion_tokens_details": {"reasoning_tokens": 0},
}
CHAT_EVENTS: list[dict[str, Any] | str] = [
    chat_chunk({"role": "assistant", "content": "", "refusal": None}),
    chat_chunk({"content": "Let me "}),
    chat_chunk({"content": "check – café ✓."}),
    chat_chunk(tool_delta(0, "", id="call_a", name="read_file")),
    chat_chunk(tool_delta(0, '{"pa')),
    chat_chunk(tool_delta(0, 'th": "a.txt"}')),
    chat_chunk(tool_delta(1, '{"dir": "', id="call_b", name="list_dir")),
    chat_chunk(tool_delta(1, '."}')),
    chat_chunk({}, "tool_calls"),
    chat_chunk(choices=[], usage=CHAT_USAGE),
    "[DONE]",
]
CHAT_STREAM = sse(*CHAT_EVENTS)


def test_chat_stream() -> None:
    assembler = assemble("chat", CHAT_STREAM)
    assert assembler.complete
    assert (assembler.events, assembler.malformed, assembler.error) == (10, 0, None)
    response = assembler.result()
    assert response.text == "Let me check – café ✓."
    assert calls(response) == [
        ("call_a", "read_file", {"path": "a.txt"}),
        ("call_b", "list_dir", {"dir": "."}),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100)
    assert (response.model, response.id) == ("gpt-4o-mini-2024-07-18", "chatcmpl-9")


def test_chat_stream_without_done_is_complete_at_its_finish_reason() -> None:
    events = [chat_chunk({"content": "Hi"}), chat_chunk({}, "stop")]
    assert not assemble("chat", sse(events[0])).complete
    assembler = assemble("chat", sse(*events))
    assert assembler.complete
    assert (assembler.result().text, assembler.result().finish_reason) == ("Hi", "stop")
    assert assembler.result().usage == Usage()


def test_chat_stream_cut_short() -> None:
    assembler = assemble("chat", sse(*CHAT_EVENTS[:5]))
    assert not assembler.complete
    response = assembler.result()
    assert response.text == "Let me check – café ✓."
    assert calls(response) == [("call_a", "read_file", {"_raw": '{"pa'})]
    assert response.finish_reason is None


def test_chat_stream_reasoning_and_odd_servers() -> None:
    """Reasoning deltas (one of the two names, not both counted), whole calls without an
    index, a name repeated in every delta, a second choice ignored."""
    body = sse(
        {"choices": [{"delta": {"reasoning_content": "a", "reasoning": "a"}}]},
        {"choices": [{"delta": {"reasoning": "b"}}, {"index": 1, "delta": {"content": "no"}}]},
        {"choices": [{"delta": {"tool_calls": [{"id": "c1", "function": {"name": "f"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"id": "c2", "function": {"name": "g"}}]}}]},
        {"choices": [{"delta": {"content": "done"}, "finish_reason": "tool_calls"}]},
    )
    response = assemble("chat", body).result()
    assert response.reasoning == ["ab"]
    assert response.text == "done"
    assert calls(response) == [("c1", "f", {}), ("c2", "g", {})]


def test_chat_stream_legacy_custom_and_unindexed_calls() -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"delta": delta, "finish_reason": finish}]}

    legacy = sse(
        chunk({"function_call": {"name": "f", "arguments": '{"a"'}}),
        chunk({"function_call": {"arguments": ": 1}"}}),
        chunk({}, "function_call"),
    )
    response = assemble("chat", legacy).result()
    assert (calls(response), response.finish_reason) == ([("call_0", "f", {"a": 1})], "tool_calls")

    custom = {"index": 0, "id": "c", "type": "custom", "custom": {"name": "patch", "input": "*"}}
    body = sse(
        chunk({"tool_calls": [custom]}),
        chunk({"tool_calls": [{"index": 0, "custom": {"input": "** Begin"}}]}),
        chunk({"tool_calls": [{"id": "d", "function": {"name": "g", "arguments": '{"b":'}}]}),
        chunk({"tool_calls": [{"id": "d", "function": {"arguments": " 2}"}}]}),
    )
    assert calls(assemble("chat", body).result()) == [
        ("c", "patch", {"input": "*** Begin"}),
        ("d", "g", {"b": 2}),
    ]


def test_chat_stream_error_chunk() -> None:
    error = {"error": {"message": "The server had an error", "type": "server_error"}}
    assembler = assemble("chat", sse(chat_chunk({"content": "par"}), error))
    assert assembler.error == "The server had an error"
    assert not assembler.complete
    assert assembler.result().text == "par"
    vllm = {"object": "error", "message": "Out of memory", "type": "InternalServerError"}
    assert assemble("chat", sse(vllm)).error == "Out of memory"


# --- streams: Responses -----------------------------------------------------------------------


def responses_events(*events: dict[str, Any]) -> list[dict[str, Any]]:
    """Numbered as the API numbers them, and checked against the SDK's event types."""
    numbered = [{**event, "sequence_number": n} for n, event in enumerate(events)]
    for event in numbered:
        _RESPONSES_EVENT.validate_python(event)
    return numbered


def text_delta(delta: str, index: int = 1) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": index,
        "content_index": 0,
        "delta": delta,
        "logprobs": [],
    }


def arguments_delta(delta: str) -> dict[str, Any]:
    kind = "response.function_call_arguments.delta"
    return {"type": kind, "item_id": "fc_1", "output_index": 2, "delta": delta}


STARTED = response_object([], status="in_progress", usage=None)
ENDED = response_object([REASONING_ITEM, MESSAGE_ITEM, CALL_ITEM])
EMPTY_MESSAGE = {**MESSAGE_ITEM, "status": "in_progress", "content": []}
EMPTY_CALL = {**CALL_ITEM, "status": "in_progress", "arguments": ""}
EMPTY_REASONING = {**REASONING_ITEM, "summary": []}
SUMMARY = {"item_id": "rs_1", "output_index": 0, "summary_index": 0}
TEXT_PART = {"type": "output_text", "text": "", "annotations": []}
RESPONSES_EVENTS = responses_events(
    {"type": "response.created", "response": STARTED},
    {"type": "response.in_progress", "response": STARTED},
    {"type": "response.output_item.added", "output_index": 0, "item": EMPTY_REASONING},
    {"type": "response.reasoning_summary_part.added", **SUMMARY,
     "part": {"type": "summary_text", "text": ""}},
    {"type": "response.reasoning_summary_text.delta", **SUMMARY, "delta": "Thinking about"},
    {"type": "response.reasoning_summary_text.delta", **SUMMARY, "delta": " it."},
    {"type": "response.reasoning_summary_text.done", **SUMMARY, "text": "Thinking about it."},
    {"type": "response.output_item.done", "output_index": 0, "item": REASONING_ITEM},
    {"type": "response.output_item.added", "output_index": 1, "item": EMPTY_MESSAGE},
    {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 1,
     "content_index": 0, "part": TEXT_PART},
    text_delta("Hello"),
    text_delta(", wor"),
    text_delta("ld"),
    {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 1,
     "content_index": 0, "text": "Hello, world", "logprobs": []},
    {"type": "response.output_item.done", "output_index": 1, "item": MESSAGE_ITEM},
    {"type": "response.output_item.added", "output_index": 2, "item": EMPTY_CALL},
    arguments_delta('{"cmd":'),
    arguments_delta(' ["ls"]}'),
    {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 2,
     "name": "shell", "arguments": '{"cmd": ["ls"]}'},
    {"type": "response.output_item.done", "output_index": 2, "item": CALL_ITEM},
    {"type": "response.completed", "response": ENDED},
)  # fmt: skip
RESPONSES_STREAM = sse(*RESPONSES_EVENTS, named=True)


def test_responses_stream() -> None:
    assembler = assemble("responses", RESPONSES_STREAM)
    assert assembler.complete
    assert (assembler.events, assembler.malformed, assembler.error) == (21, 0, None)
    response = assembler.result()
    assert response.text == "Hello, world"
    assert response.reasoning == ["Thinking about it."]
    assert calls(response) == [("call_1", "shell", {"cmd": ["ls"]})]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(
        input_tokens=2000, output_tokens=300, cache_read_tokens=1500, reasoning_tokens=200
    )
    assert (response.model, response.id) == ("gpt-5.5", "resp_1")


def test_responses_stream_read_from_its_events() -> None:
    """Cut before the end (and, apart, ended by a response without its output): what the
    deltas said; before `.done` events arrive the deltas alone."""
    cut = assemble("responses", sse(*RESPONSES_EVENTS[:-1]))
    assert not cut.complete
    response = cut.result()
    assert (response.text, response.reasoning) == ("Hello, world", ["Thinking about it."])
    assert calls(response) == [("call_1", "shell", {"cmd": ["ls"]})]
    assert (response.finish_reason, response.usage, response.id) == (None, Usage(), "resp_1")

    deltas_only = [e for e in RESPONSES_EVENTS[:-1] if not e["type"].endswith(".done")]
    assert dumped(assemble("responses", sse(*deltas_only))) == dumped(cut)

    bare_end = {"type": "response.completed", "response": {**ENDED, "output": []}}
    ended = assemble("responses", sse(*RESPONSES_EVENTS[:-1], bare_end))
    assert ended.complete
    assert dumped(ended) == dumped(assemble("responses", RESPONSES_STREAM))


def test_responses_stream_ended_by_an_unreadable_response() -> None:
    odd = {**ENDED, "output": [{"type": "function_call", "call_id": "call_1"}]}  # no name
    assembler = assemble(
        "responses", sse(*RESPONSES_EVENTS[:-1], {"type": "response.completed", "response": odd})
    )
    assert assembler.complete
    assert dumped(assembler) == dumped(assemble("responses", RESPONSES_STREAM))


def test_responses_stream_custom_tool_cut_mid_input() -> None:
    added = {**PATCH_ITEM, "input": ""}
    delta = {"type": "response.custom_tool_call_input.delta", "item_id": "ctc_1", "output_index": 0}
    events = responses_events(
        {"type": "response.created", "response": STARTED},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {**delta, "delta": "*** Begin Patch\n"},
        {**delta, "delta": "*** Add File: a.md"},
    )
    response = assemble("responses", sse(*events, named=True)).result()
    assert calls(response) == [
        ("call_2", "apply_patch", {"input": "*** Begin Patch\n*** Add File: a.md"})
    ]


def test_responses_stream_incomplete_and_failed() -> None:
    short = response_object(
        [MESSAGE_ITEM], status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    incomplete = assemble("responses", sse({"type": "response.incomplete", "response": short}))
    assert incomplete.complete
    assert incomplete.result().finish_reason == "length"

    failed = response_object(
        [], status="failed", error={"code": "server_error", "message": "The model crashed"}
    )
    events = responses_events({"type": "response.failed", "response": failed})
    assembler = assemble("responses", sse(*events, named=True))
    assert (assembler.complete, assembler.error) == (False, "The model crashed")
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None}
    assert assemble("responses", sse(*responses_events(error))).error == "Slow down"
    no_message = assemble(
        "responses", sse({"type": "response.failed", "response": {"error": None}})
    )
    assert no_message.error == "response.failed without a message"


# --- streams: Anthropic Messages --------------------------------------------------------------


def messages_events(*events: dict[str, Any]) -> list[dict[str, Any]]:
    for event in events:
        if event["type"] not in ("ping", "error"):
            _MESSAGES_EVENT.validate_python(event)
    return list(events)


def json_delta(partial: str) -> dict[str, Any]:
    delta = {"type": "input_json_delta", "partial_json": partial}
    return {"type": "content_block_delta", "index": 1, "delta": delta}


MESSAGE_START: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [],
    "stop_reason": None,
    "stop_sequence": None,
    "usage": {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
        "output_tokens": 1,
    },
}
MESSAGES_EVENTS = messages_events(
    {"type": "message_start", "message": MESSAGE_START},
    {"type": "ping"},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "I'll "}},
    {"type": "content_block_delta", "index": 0,
     "delta": {"type": "text_delta", "text": "write\u2028it."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1,
     "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}}},
    json_delta(""),
    json_delta('{"file_pa'),
    json_delta('th": "a.md", "con'),
    json_delta('tent": "# A"}'),
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
     "usage": {"output_tokens": 42}},
    {"type": "message_stop"},
)  # fmt: skip
MESSAGES_STREAM = sse(*MESSAGES_EVENTS, named=True)


def test_messages_stream() -> None:
    assembler = assemble("messages", MESSAGES_STREAM)
    assert assembler.complete
    assert (assembler.events, assembler.malformed, assembler.error) == (14, 0, None)
    response = assembler.result()
    assert response.text == "I'll write\u2028it."
    assert calls(response) == [("toolu_1", "Write", {"file_path": "a.md", "content": "# A"})]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(
        input_tokens=115, output_tokens=42, cache_read_tokens=100, cache_write_tokens=5
    )
    assert (response.model, response.id) == ("claude-sonnet-4-5", "msg_01")


def test_messages_stream_closed_after_message_delta_is_complete() -> None:
    assembler = assemble("messages", sse(*MESSAGES_EVENTS[:-1], named=True))
    assert assembler.complete
    assert dumped(assembler) == dumped(assemble("messages", MESSAGES_STREAM))


def test_messages_stream_cut_mid_block_is_not_complete() -> None:
    assembler = assemble("messages", sse(*MESSAGES_EVENTS[:9], named=True))
    assert not assembler.complete
    response = assembler.result()
    assert response.text == "I'll write\u2028it."
    assert calls(response) == [("toolu_1", "Write", {"_raw": '{"file_pa'})]
    assert response.finish_reason is None
    assert response.usage == Usage(
        input_tokens=115, output_tokens=1, cache_read_tokens=100, cache_write_tokens=5
    )


def test_messages_stream_thinking_and_usage_updates() -> None:
    thinking = {"type": "thinking", "thinking": "", "signature": ""}
    events = messages_events(
        {"type": "message_start", "message": MESSAGE_START},
        {"type": "content_block_start", "index": 0, "content_block": thinking},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "Hmm, "}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "yes."}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": "EqQB"}},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "redacted_thinking", "data": "opaque"}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "text_delta", "text": "Yes."}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
         "usage": {"input_tokens": 12, "cache_read_input_tokens": None, "output_tokens": 64}},
    )  # fmt: skip
    response = assemble("messages", sse(*events)).result()
    assert (response.text, response.reasoning) == ("Yes.", ["Hmm, yes."])
    assert response.finish_reason == "length"
    assert response.usage == Usage(
        input_tokens=117, output_tokens=64, cache_read_tokens=100, cache_write_tokens=5
    )


def test_messages_stream_error_event() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assembler = assemble("messages", sse(*MESSAGES_EVENTS[:4], error, named=True))
    assert assembler.error == "Overloaded"
    assert not assembler.complete
    assert assembler.result().text == "I'll "


# --- streams: framing -------------------------------------------------------------------------

STREAMS: list[tuple[wire.Api, bytes]] = [
    ("chat", CHAT_STREAM),
    ("responses", RESPONSES_STREAM),
    ("messages", MESSAGES_STREAM),
]


@pytest.mark.parametrize(("api", "body"), STREAMS)
def test_a_stream_fed_one_byte_at_a_time(api: wire.Api, body: bytes) -> None:
    whole = assemble(api, body)
    bytewise = assemble(api, body, size=1)
    assert dumped(bytewise) == dumped(whole)
    assert (bytewise.events, bytewise.malformed, bytewise.complete) == (
        whole.events,
        0,
        True,
    )


@settings(max_examples=60, deadline=None)
@given(stream=st.sampled_from(STREAMS), data=st.data())
def test_a_stream_in_any_chunks(stream: tuple[wire.Api, bytes], data: st.DataObject) -> None:
    api, body = stream
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=40).map(sorted))
    assembler = StreamAssembler(api)
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        assembler.feed(body[start:end])
    assert dumped(assembler) == dumped(assemble(api, body))
    assert assembler.complete


@pytest.mark.parametrize(("api", "body"), STREAMS)
@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_crlf_and_cr_framing(api: wire.Api, body: bytes, newline: bytes) -> None:
    framed = body.replace(b"\n", newline)
    assert dumped(assemble(api, framed, size=1)) == dumped(assemble(api, body))
    assert dumped(assemble(api, framed, size=7)) == dumped(assemble(api, body))


def test_sse_fields_comments_and_multiline_data() -> None:
    body = (
        b"\xef\xbb\xbf: a comment, then a keep-alive\n\n"
        b"retry: 1000\nid: 7\n"
        b'data:{"choices": [{"delta":\n'
        b'data: {"content": "a"}}]}\n\n'
        b"event: message\ndata\n\n"
        b": ping\n"
        b'data: {"choices": [{"delta": {"content": "b"}, "finish_reason": "stop"}]}\n\n'
        b'data: {"choices": [{"delta": {"content": "never dispatched"}}]}\n'
    )
    assembler = assemble("chat", body)
    assert (assembler.result().text, assembler.events, assembler.malformed) == ("ab", 2, 0)


def test_garbage_data_is_counted_not_raised() -> None:
    body = (
        sse(
            "not json",
            "{",
            "42",
            '["a list"]',
            "[" * 100_000,
            chat_chunk({"content": "ok"}),
            '"a string"',
        )
        + b"data: \xff\xfe\n\n"
    )
    assembler = assemble("chat", body)
    assert (assembler.malformed, assembler.events) == (7, 1)
    assert assembler.result().text == "ok"
    assert not assembler.complete


def test_embeddings_are_not_streamed() -> None:
    with pytest.raises(ValueError, match="not streamed"):
        StreamAssembler("embeddings")


EVENT_TYPES = sorted(
    {e["type"] for e in [*RESPONSES_EVENTS, *MESSAGES_EVENTS]}
    | {"text_delta", "thinking_delta", "input_json_delta", "tool_use", "text", "thinking"}
    | {"message", "function_call", "custom_tool_call", "reasoning", "shell_call", "custom"}
    | {"error", "response.failed", "response.incomplete", "response.refusal.delta"}
    | {"response.custom_tool_call_input.delta", "response.reasoning_text.delta"}
)
FIELDS = sorted(
    {key for e in [*CHAT_EVENTS, *RESPONSES_EVENTS, *MESSAGES_EVENTS] if isinstance(e, dict)
     for key in e}
    | {"delta", "content", "tool_calls", "function", "arguments", "name", "id", "index", "text"}
    | {"content_block", "partial_json", "stop_reason", "output", "status", "call_id", "input"}
    | {"summary", "reasoning", "reasoning_content", "refusal", "custom", "function_call"}
    | {"choices", "finish_reason", "usage", "item", "error", "message", "incomplete_details"}
)  # fmt: skip
_KEYS = st.sampled_from(FIELDS) | st.text(max_size=2)
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-1, 3)
    | st.floats(allow_nan=False)
    | st.sampled_from(EVENT_TYPES)
    | st.text(max_size=4)
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=8,
)
_EVENTS = st.tuples(st.sampled_from(EVENT_TYPES), st.dictionaries(_KEYS, _VALUES, max_size=6))


@settings(max_examples=100, deadline=None)
@given(
    api=st.sampled_from(["chat", "responses", "messages"]),
    events=st.lists(_EVENTS.map(lambda e: {"type": e[0], **e[1]}), max_size=8),
)
def test_odd_events_never_raise(api: wire.Api, events: list[dict[str, Any]]) -> None:
    assembler = StreamAssembler(api)
    assembler.feed(sse(*events, named=True))
    assert assembler.events == len(events)
    assembler.result()
    _ = (assembler.complete, assembler.error)


_ODD = (
    st.none()
    | st.booleans()
    | st.integers(-1, 2)
    | st.text(max_size=3)
    | st.sampled_from(EVENT_TYPES)
    | st.sampled_from([[], {}, [1], [{}], {"type": "text"}, {"x": None}])
)


def _mutated(value: Any, data: st.DataObject) -> Any:
    """`value` with one of its values, anywhere inside, replaced by an odd one."""
    if isinstance(value, dict) and value and data.draw(st.integers(0, 3)):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutated(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.integers(0, 3)):
        index = data.draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mutated(value[index], data), *value[index + 1 :]]
    return data.draw(_ODD)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_real_streams_with_odd_values_never_raise(data: st.DataObject) -> None:
    """Each run takes a real stream and gives a few of its events an odd value somewhere."""
    streams: list[tuple[wire.Api, list[Any]]] = [
        ("chat", CHAT_EVENTS[:-1]),
        ("responses", RESPONSES_EVENTS),
        ("messages", MESSAGES_EVENTS),
    ]
    api, events = data.draw(st.sampled_from(streams))
    changed = list(events)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(changed) - 1))
        event = changed[index]
        assert isinstance(event, dict)
        key = data.draw(st.sampled_from(sorted(event)))
        changed[index] = {**event, key: _mutated(event[key], data)}
    assembler = StreamAssembler(api)
    assembler.feed(sse(*changed, named=True))
    assert (assembler.events, assembler.malformed) == (len(changed), 0)
    assembler.result()
    _ = (assembler.complete, assembler.error)
