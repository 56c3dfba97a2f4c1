"""`RoundTrip`: the fake answers a tool round trip with no script, from the request alone."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import httpx2
import pytest
from anthropic import Anthropic
from openai import OpenAI

from tests.fakes.provider_server import ProviderServer, Reply, RoundTrip
from tests.fakes.provider_streams import parse_events

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}


@pytest.fixture
def server() -> Any:
    with ProviderServer(default=RoundTrip(answer="Weather")) as server:
        yield server


def test_openai_chat_round_trip(server: ProviderServer) -> None:
    tools: Any = [{"type": "function", "function": {"name": "forecast", "parameters": SCHEMA}}]
    messages: list[Any] = [{"role": "user", "content": "Paris"}]
    with OpenAI(base_url=server.openai_base_url, api_key="sk", max_retries=0, timeout=5) as client:
        first = client.chat.completions.create(model="m", messages=messages, tools=tools)
        [call] = first.choices[0].message.tool_calls or []
        assert call.type == "function"
        assert json.loads(call.function.arguments) == {"city": "Paris", "days": 0}
        assert first.choices[0].finish_reason == "tool_calls"
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ]
        stream = client.chat.completions.create(
            model="m", messages=messages, tools=tools, stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert text == "Weather: sunny"


def test_openai_responses_round_trip(server: ProviderServer) -> None:
    tools: Any = [{"type": "function", "name": "forecast", "parameters": SCHEMA}]
    with OpenAI(base_url=server.openai_base_url, api_key="sk", max_retries=0, timeout=5) as client:
        with client.responses.stream(model="m", input="Oslo", tools=tools) as stream:
            [call] = stream.get_final_response().output
        assert call.type == "function_call" and call.name == "forecast"
        answer = client.responses.create(
            model="m",
            input=[
                {"role": "user", "content": [{"type": "input_text", "text": "Oslo"}]},
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                },
                {"type": "function_call_output", "call_id": call.call_id, "output": "snow"},
            ],
            tools=tools,
        )
    assert json.loads(call.arguments) == {"city": "Oslo", "days": 0}
    assert answer.output_text == "Weather: snow"


def test_anthropic_round_trip(server: ProviderServer) -> None:
    tools: Any = [{"name": "forecast", "input_schema": SCHEMA}]
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "Rome"}]}]
    with Anthropic(base_url=server.url, api_key="sk", max_retries=0, timeout=5) as client:
        first = client.messages.create(model="c", max_tokens=9, messages=messages, tools=tools)
        [tool_use] = first.content
        assert tool_use.type == "tool_use" and tool_use.input == {"city": "Rome", "days": 0}
        result = [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "warm"}]
        messages += [
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": result},
        ]
        with client.messages.stream(
            model="c", max_tokens=9, messages=messages, tools=tools
        ) as stream:
            text = stream.get_final_text()
    assert tool_use.id.startswith("toolu_")
    assert text == "Weather: warm"


def test_without_tools_it_echoes_and_a_tool_and_arguments_can_be_chosen() -> None:
    tools = [
        {"type": "function", "function": {"name": name, "parameters": SCHEMA}}
        for name in ("first", "second")
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    with ProviderServer() as server:
        server.default = RoundTrip(tool="second", arguments={"city": "Nice"})
        chosen = _post(server, "/v1/chat/completions", body)["choices"][0]["message"]
        echoed = _post(server, "/v1/chat/completions", {**body, "tools": []})
    call = chosen["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("second", {"city": "Nice"})
    assert echoed["choices"][0]["message"]["content"] == "hi"


def test_answers_depend_on_the_request_only(server: ProviderServer) -> None:
    """Twelve trials of three tasks, sent at once in a shuffled order: each task always gets
    the same bytes (ids and `created` included), streamed or not, on any server."""
    tools = [{"type": "function", "name": "forecast", "parameters": SCHEMA}]
    bodies = [
        {"model": "m", "input": city, "tools": tools, "stream": stream}
        for city in ("Oslo", "Rome", "Lima")
        for stream in (False, True)
    ]
    order = [index for index in range(len(bodies)) for _ in range(2)]
    random.Random(7).shuffle(order)
    answers: list[list[bytes]] = [[] for _ in bodies]

    def ask(index: int) -> None:
        with httpx2.Client(timeout=5) as client:
            response = client.post(f"{server.openai_base_url}/responses", json=bodies[index])
        answers[index].append(response.content)

    threads = [threading.Thread(target=ask, args=(index,)) for index in order]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    with ProviderServer(default=RoundTrip(answer="Weather")) as other:
        again = [_post(other, "/v1/responses", bodies[0], raw=True)]
    assert all(len(set(sent)) == 1 and len(sent) == 2 for sent in answers)
    assert len({sent[0] for sent in answers}) == len(bodies)
    assert again == answers[0][:1]
    # The call id comes from the user's text: the same whether the answer is streamed or not.
    call = json.loads(answers[0][0])["output"][0]
    streamed = json.loads(parse_events(answers[1][0])[-1][1])["response"]["output"][0]
    assert (streamed["call_id"], streamed["arguments"]) == (call["call_id"], call["arguments"])


def test_a_scripted_behaviour_still_comes_first(server: ProviderServer) -> None:
    server.script(Reply("scripted"))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert _post(server, "/v1/chat/completions", body)["choices"][0]["message"]["content"] == (
        "scripted"
    )
    assert _post(server, "/v1/chat/completions", body)["choices"][0]["message"]["content"] == ("hi")


def _post(server: ProviderServer, path: str, body: dict[str, Any], raw: bool = False) -> Any:
    with httpx2.Client(timeout=5) as client:
        response = client.post(f"{server.url}{path}", json=body)
    return response.content if raw else response.json()
