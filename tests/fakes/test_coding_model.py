"""`WritesFile` through the official SDKs, and the custom tool calls it needs (Codex's patches)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import httpx2
import pytest
from anthropic import Anthropic
from openai import OpenAI
from openai.types.responses import ResponseCustomToolCallInputDeltaEvent

from tests.fakes.coding_model import WritesFile, add_file_patch
from tests.fakes.provider_server import ProviderServer, Reply, ToolUse

PATCH = "*** Begin Patch\n*** Add File: /ws/notes/a.md\n+one\n+\n+two\n*** End Patch"
CLAUDE_SYSTEM: Any = [
    {"type": "text", "text": "You are Claude Code."},
    {"type": "text", "text": "# Environment\n - Primary working directory: /ws\n - Is git: no\n"},
]
CODEX_CONTEXT = (
    "<environment_context>\n  <cwd>/ws</cwd>\n  <shell>bash</shell>\n</environment_context>"
)
APPLY_PATCH: Any = [{"type": "custom", "name": "apply_patch", "format": {"type": "text"}}]


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(default=WritesFile("notes/a.md", "one\n\ntwo\n", answer="Done")) as server:
        yield server


@pytest.fixture
def anthropic(server: ProviderServer) -> Iterator[Anthropic]:
    with Anthropic(base_url=server.anthropic_base_url, api_key="sk", max_retries=0) as client:
        yield client


@pytest.fixture
def openai(server: ProviderServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=server.openai_base_url, api_key="sk", max_retries=0) as client:
        yield client


def test_claude_code_gets_a_write_by_absolute_path_then_the_answer(anthropic: Anthropic) -> None:
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "write"}]}]
    first = anthropic.messages.create(
        model="c", max_tokens=9, system=CLAUDE_SYSTEM, messages=messages
    )
    [tool_use] = first.content
    assert tool_use.type == "tool_use" and tool_use.name == "Write"
    assert tool_use.input == {"file_path": "/ws/notes/a.md", "content": "one\n\ntwo\n"}
    assert tool_use.id.startswith("toolu_") and first.stop_reason == "tool_use"
    with anthropic.messages.stream(
        model="c", max_tokens=9, system=CLAUDE_SYSTEM, messages=messages
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.content == first.content
    result = [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "File created"}]
    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": result},
    ]
    with anthropic.messages.stream(
        model="c", max_tokens=9, system=CLAUDE_SYSTEM, messages=messages
    ) as stream:
        assert stream.get_final_text() == "Done"


def test_the_working_directory_may_be_in_a_string_system_or_in_the_messages(
    anthropic: Anthropic,
) -> None:
    stated = "Primary working directory: /ws"
    in_system = anthropic.messages.create(
        model="c", max_tokens=9, system=stated, messages=[{"role": "user", "content": "write"}]
    )
    in_messages = anthropic.messages.create(
        model="c", max_tokens=9, messages=[{"role": "user", "content": f"{stated}\nwrite"}]
    )
    for answer in (in_system, in_messages):
        [tool_use] = answer.content
        assert tool_use.type == "tool_use" and tool_use.input["file_path"] == "/ws/notes/a.md"


def test_codex_gets_an_apply_patch_custom_call(openai: OpenAI) -> None:
    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": CODEX_CONTEXT}]},
        {"role": "user", "content": [{"type": "input_text", "text": "write"}]},
    ]
    first = openai.responses.create(model="m", input=items, tools=APPLY_PATCH)
    [call] = first.output
    assert call.type == "custom_tool_call" and call.name == "apply_patch"
    assert call.input == PATCH and call.call_id.startswith("call_")
    items += [
        {"type": "custom_tool_call", "call_id": call.call_id, "name": call.name, "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Success."},
    ]
    assert openai.responses.create(model="m", input=items, tools=APPLY_PATCH).output_text == "Done"


def test_a_custom_call_streams_as_custom_tool_call_input_events(openai: OpenAI) -> None:
    stream = openai.responses.create(
        model="m", instructions=CODEX_CONTEXT, input="write", tools=APPLY_PATCH, stream=True
    )
    events = list(stream)
    kinds = [event.type for event in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-3:] == [
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, done, completed = events[2], events[-2], events[-1]
    assert added.type == "response.output_item.added"
    assert added.item.type == "custom_tool_call" and added.item.input == ""
    deltas = [e.delta for e in events if isinstance(e, ResponseCustomToolCallInputDeltaEvent)]
    assert len(deltas) > 1 and "".join(deltas) == PATCH
    assert done.type == "response.output_item.done" and done.item.type == "custom_tool_call"
    assert completed.type == "response.completed"
    assert completed.response.output == [done.item] and done.item.input == PATCH
    assert [event.sequence_number for event in events] == list(range(len(events)))


def test_chat_gets_a_write_file_function_call(openai: OpenAI) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "Primary working directory: /ws"},
        {"role": "user", "content": "write"},
    ]
    first = openai.chat.completions.create(model="m", messages=messages)
    [call] = first.choices[0].message.tool_calls or []
    assert call.type == "function" and call.function.name == "write_file"
    assert json.loads(call.function.arguments) == {
        "path": "/ws/notes/a.md",
        "content": "one\n\ntwo\n",
    }
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "ok"},
    ]
    stream = openai.chat.completions.create(model="m", messages=messages, stream=True)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == "Done"


def test_without_a_working_directory_it_says_so(openai: OpenAI, anthropic: Anthropic) -> None:
    answer = openai.responses.create(model="m", input="write", tools=APPLY_PATCH)
    message = anthropic.messages.create(
        model="c", max_tokens=9, messages=[{"role": "user", "content": "write"}]
    )
    assert (
        answer.output_text == "WritesFile: no working directory in the request to write notes/a.md"
    )
    assert message.content[0].type == "text" and message.content[0].text == answer.output_text


def test_answers_depend_on_the_request_only(server: ProviderServer) -> None:
    body = {"model": "m", "instructions": CODEX_CONTEXT, "input": "write", "stream": True}
    with httpx2.Client(timeout=5) as client:
        sent = [client.post(f"{server.openai_base_url}/responses", json=body) for _ in range(2)]
    assert sent[0].content == sent[1].content


def test_custom_calls_are_function_calls_outside_responses(provider_server: ProviderServer) -> None:
    call = ToolUse("apply_patch", PATCH, id="call_1", custom=True)
    provider_server.script(Reply(tool_calls=[call]), Reply(tool_calls=[call]))
    with OpenAI(base_url=provider_server.openai_base_url, api_key="sk", max_retries=0) as client:
        chat = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
    with Anthropic(base_url=provider_server.url, api_key="sk", max_retries=0) as anthropic:
        message = anthropic.messages.create(
            model="c", max_tokens=9, messages=[{"role": "user", "content": "x"}]
        )
    [function_call] = chat.choices[0].message.tool_calls or []
    assert function_call.type == "function" and function_call.function.arguments == PATCH
    assert message.content[0].type == "tool_use" and message.content[0].input == cast(Any, PATCH)


def test_add_file_patch_prefixes_every_line() -> None:
    assert (
        add_file_patch("/a", "x\ny") == "*** Begin Patch\n*** Add File: /a\n+x\n+y\n*** End Patch"
    )
