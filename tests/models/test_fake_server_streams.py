"""The fake provider server streams, answers Responses and Embeddings, as the real SDKs expect.

Each test drives the official `openai` or `anthropic` SDK (sync and async) against the fake,
and checks the raw wire format where the SDK would hide a mistake.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
from anthropic import Anthropic, AsyncAnthropic
from openai import AsyncOpenAI, OpenAI

from tests.fakes.provider_server import ProviderServer, Reply, ToolUse
from tests.fakes.provider_streams import parse_events

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
CHAT_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}
]
RESPONSES_TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
ANTHROPIC_TOOLS: list[Any] = [{"name": "get_weather", "input_schema": WEATHER}]


def openai_client(server: ProviderServer) -> OpenAI:
    return OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0, timeout=5)


def async_openai_client(server: ProviderServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0, timeout=5)


def raw_events(server: ProviderServer, path: str, body: dict[str, Any]) -> list[Any]:
    """POST and read the stream as events: `(event, data)`, data parsed unless `[DONE]`."""
    with httpx2.Client(timeout=5) as client:
        response = client.post(f"{server.url}{path}", json={**body, "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    return [
        (event, data if data == "[DONE]" else json.loads(data))
        for event, data in parse_events(response.content)
    ]


# --- Chat Completions ---------------------------------------------------------------------


def test_chat_stream_wire_format(provider_server: ProviderServer) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    provider_server.script(Reply("a sunny day"), Reply("a sunny day"))
    plain = raw_events(provider_server, "/v1/chat/completions", body)
    with_usage = raw_events(
        provider_server, "/v1/chat/completions", {**body, "stream_options": {"include_usage": True}}
    )
    assert all(event is None for event, _ in plain)  # Chat Completions has no `event:` lines
    deltas = [data["choices"][0]["delta"] for _, data in plain[:-2]]
    assert deltas[0]["role"] == "assistant"
    assert len(deltas) > 2 and "".join(d.get("content", "") for d in deltas) == "a sunny day"
    assert plain[-2][1]["choices"][0]["finish_reason"] == "stop"
    assert plain[-1] == (None, "[DONE]")
    assert "usage" not in plain[-2][1]
    usage = with_usage[-2][1]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    assert with_usage[-3][1]["choices"][0]["finish_reason"] == "stop"


def test_chat_stream_tool_call_deltas(provider_server: ProviderServer) -> None:
    provider_server.script(Reply(tool_calls=[ToolUse("get_weather", {"city": "Paris"}, id="c1")]))
    events = raw_events(provider_server, "/v1/chat/completions", {"model": "m", "messages": []})
    calls = [
        data["choices"][0]["delta"]["tool_calls"][0]
        for _, data in events[:-1]
        if "tool_calls" in data["choices"][0]["delta"]
    ]
    assert calls[0] == {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    assert len(calls) > 2 and all(call.keys() == {"index", "function"} for call in calls[1:])
    assert "".join(call["function"]["arguments"] for call in calls) == '{"city": "Paris"}'
    assert events[-2][1]["choices"][0]["finish_reason"] == "tool_calls"


def test_chat_stream_with_the_sdk(provider_server: ProviderServer) -> None:
    provider_server.script(Reply("Paris is sunny", tool_calls=[ToolUse("get_weather", {"a": 1})]))
    with (
        openai_client(provider_server) as client,
        client.chat.completions.stream(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=CHAT_TOOLS,
            stream_options={"include_usage": True},
        ) as stream,
    ):
        for _ in stream:
            pass
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    assert message.content == "Paris is sunny"
    assert message.tool_calls is not None
    function = message.tool_calls[0].function
    assert (function.name, json.loads(function.arguments)) == ("get_weather", {"a": 1})
    assert completion.usage is not None and completion.usage.total_tokens > 0
    assert provider_server.last_request.streamed
    assert provider_server.last_request.api == "chat"


def test_chat_stream_with_the_async_sdk(provider_server: ProviderServer) -> None:
    async def main() -> list[str]:
        async with async_openai_client(provider_server) as client:
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "echo this"}], stream=True
            )
            return [chunk.choices[0].delta.content or "" async for chunk in stream]

    parts = anyio.run(main)
    assert "".join(parts) == "echo this" and len([p for p in parts if p]) > 1


# --- Responses ----------------------------------------------------------------------------


def test_responses_function_call_round_trip_with_the_sdk(provider_server: ProviderServer) -> None:
    provider_server.script(
        Reply(tool_calls=[ToolUse("get_weather", {"city": "Paris"}, id="call_1")]),
        Reply("It is sunny in Paris."),
    )
    with openai_client(provider_server) as client:
        first = client.responses.create(
            model="m", instructions="Be brief.", input="Weather in Paris?", tools=RESPONSES_TOOLS
        )
        [call] = first.output
        assert call.type == "function_call"
        assert (call.call_id, call.name, call.arguments) == (
            "call_1",
            "get_weather",
            '{"city": "Paris"}',
        )
        second = client.responses.create(
            model="m",
            input=[
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": call.arguments,
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            ],
            tools=RESPONSES_TOOLS,
        )
    assert (second.object, second.status) == ("response", "completed")
    assert second.output_text == "It is sunny in Paris."
    assert second.usage is not None
    assert second.usage.input_tokens_details.cached_tokens == 0
    assert second.usage.output_tokens_details.reasoning_tokens == 0
    assert second.usage.total_tokens == second.usage.input_tokens + second.usage.output_tokens
    assert [r.api for r in provider_server.requests] == ["responses", "responses"]
    assert provider_server.requests[0].json["instructions"] == "Be brief."


def test_responses_stream_wire_format(provider_server: ProviderServer) -> None:
    provider_server.script(Reply("sunny all day", tool_calls=[ToolUse("get_weather", {"c": 1})]))
    events = raw_events(provider_server, "/v1/responses", {"model": "m", "input": "x"})
    assert all(event == data["type"] for event, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    kinds = [event for event, _ in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds.count("response.output_text.delta") > 1
    assert kinds.count("response.function_call_arguments.delta") > 1
    assert kinds[-1] == "response.completed"
    for kind in ("output_text.done", "content_part.done", "function_call_arguments.done"):
        assert f"response.{kind}" in kinds
    completed = events[-1][1]["response"]
    assert (completed["object"], completed["status"]) == ("response", "completed")
    assert [item["type"] for item in completed["output"]] == ["message", "function_call"]
    assert set(completed["usage"]) == {
        "input_tokens",
        "input_tokens_details",
        "output_tokens",
        "output_tokens_details",
        "total_tokens",
    }


def test_responses_stream_with_the_sdk(provider_server: ProviderServer) -> None:
    provider_server.script(Reply("sunny", tool_calls=[ToolUse("get_weather", {"city": "Oslo"})]))
    with (
        openai_client(provider_server) as client,
        client.responses.stream(model="m", input="Oslo?", tools=RESPONSES_TOOLS) as stream,
    ):
        texts = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(texts) == final.output_text == "sunny"
    call = final.output[1]
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Oslo"}


def test_responses_with_the_async_sdk(provider_server: ProviderServer) -> None:
    async def main() -> tuple[str, list[str], str]:
        async with async_openai_client(provider_server) as client:
            whole = await client.responses.create(model="m", input="one")
            stream = await client.responses.create(model="m", input="two", stream=True)
            kinds: list[str] = [event.type async for event in stream]
            async with client.responses.stream(model="m", input="three") as helper:
                final = await helper.get_final_response()
        return whole.output_text, kinds, final.output_text

    whole, kinds, final = anyio.run(main)
    assert (whole, final) == ("one", "three")
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [r.streamed for r in provider_server.requests] == [False, True, True]


# --- Embeddings ---------------------------------------------------------------------------


def test_embeddings_with_the_sdk(provider_server: ProviderServer) -> None:
    with openai_client(provider_server) as client:
        # The SDK asks for base64 unless told otherwise, and decodes it to floats.
        listed = client.embeddings.create(model="e", input=["cat", "dog", "cat"])
        floats = client.embeddings.create(model="e", input="cat", encoding_format="float")
    vectors = [item.embedding for item in listed.data]
    assert [item.index for item in listed.data] == [0, 1, 2]
    assert vectors[0] == vectors[2] != vectors[1]
    assert floats.data[0].embedding == vectors[0]
    assert all(-1 <= value <= 1 for value in vectors[0]) and len(vectors[0]) == 8
    assert listed.usage.prompt_tokens == listed.usage.total_tokens > 0
    assert provider_server.requests[0].json["encoding_format"] == "base64"
    assert provider_server.last_request.api == "embeddings"


def test_embeddings_with_the_async_sdk(provider_server: ProviderServer) -> None:
    async def main() -> list[float]:
        async with async_openai_client(provider_server) as client:
            result = await client.embeddings.create(model="e", input="cat", dimensions=3)
            return result.data[0].embedding

    assert len(anyio.run(main)) == 3


# --- Anthropic Messages -------------------------------------------------------------------


def test_messages_stream_wire_format(provider_server: ProviderServer) -> None:
    provider_server.script(Reply("sunny", tool_calls=[ToolUse("get_weather", {"city": "Rome"})]))
    body = {"model": "c", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
    events = raw_events(provider_server, "/v1/messages", body)
    assert all(event == data["type"] for event, data in events)
    kinds = [event for event, _ in events]
    assert kinds[:2] == ["message_start", "ping"]
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0][1]["message"]["usage"]["input_tokens"] > 0
    starts = [data["content_block"] for _, data in events if data["type"] == "content_block_start"]
    assert starts[0] == {"type": "text", "text": ""}
    assert starts[1] == {
        "type": "tool_use",
        "id": starts[1]["id"],
        "name": "get_weather",
        "input": {},
    }
    partial = [
        data["delta"]["partial_json"]
        for _, data in events
        if data["type"] == "content_block_delta" and data["delta"]["type"] == "input_json_delta"
    ]
    assert len(partial) > 1 and json.loads("".join(partial)) == {"city": "Rome"}
    assert kinds.count("content_block_stop") == 2
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"]["output_tokens"] > 0


def test_messages_stream_with_the_sdk(provider_server: ProviderServer) -> None:
    provider_server.script(
        Reply("Checking.", tool_calls=[ToolUse("get_weather", {"city": "Rome"}, id="toolu_1")]),
        Reply("Sunny in Rome."),
    )
    messages: list[Any] = [{"role": "user", "content": "Rome?"}]
    with Anthropic(
        base_url=provider_server.anthropic_base_url, api_key="sk-ant", max_retries=0, timeout=5
    ) as client:
        with client.messages.stream(
            model="c", max_tokens=100, messages=messages, tools=ANTHROPIC_TOOLS
        ) as stream:
            texts = list(stream.text_stream)
            first = stream.get_final_message()
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sun"}],
            },
        ]
        with client.messages.stream(
            model="c", max_tokens=100, messages=messages, tools=ANTHROPIC_TOOLS
        ) as stream:
            second = stream.get_final_text()
    assert "".join(texts) == "Checking." and len(texts) > 1
    tool_use = first.content[1]
    assert tool_use.type == "tool_use" and tool_use.input == {"city": "Rome"}
    assert (first.stop_reason, first.usage.output_tokens > 0) == ("tool_use", True)
    assert second == "Sunny in Rome."


def test_messages_stream_with_the_async_sdk_a_path_prefix_and_a_query() -> None:
    async def main(base_url: str) -> str:
        async with (
            AsyncAnthropic(base_url=base_url, api_key="sk-ant", max_retries=0, timeout=5) as client,
            client.messages.stream(
                model="c",
                max_tokens=10,
                messages=[{"role": "user", "content": "hello"}],
                extra_query={"beta": "true"},  # what Claude Code sends (the Python SDK does not)
            ) as stream,
        ):
            return await stream.get_final_text()

    with ProviderServer(api_key="sk-ant") as server:
        assert anyio.run(main, f"{server.url}/run/abc") == "hello"
        request = server.last_request
    assert (request.path, request.query, request.api) == (
        "/run/abc/v1/messages",
        "beta=true",
        "messages",
    )
    assert request.streamed and request.api_key == "sk-ant"
