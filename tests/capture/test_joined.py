"""Streamed deltas that hold a trial's own value only when joined (a workspace path split
across a tool call's argument pieces) are joined into one delta before recording, so the
recording can write the value's placeholder; the stream still assembles to the same answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trialkit.capture._joined import join_split_values
from trialkit.capture.wire import Api, StreamAssembler

WORKSPACE = "/tmp/trial-3/ws"
ARGUMENTS = json.dumps({"file_path": f"{WORKSPACE}/hello.txt", "content": "hi"})


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {payload}\n\n"


def split(text: str, *cuts: str) -> list[str]:
    """`text` cut right after each of `cuts` (each must occur in it, in order)."""
    pieces, rest = [], text
    for cut in cuts:
        at = rest.index(cut) + len(cut)
        pieces.append(rest[:at])
        rest = rest[at:]
    return [*pieces, rest]


def assembled(api: Api, events: list[str]) -> dict[str, Any]:
    assembler = StreamAssembler(api)
    for event in events:
        assembler.feed(event.encode())
    assert assembler.complete
    return assembler.result().model_dump(mode="json")


def holding(events: list[str], value: str) -> list[int]:
    return [i for i, event in enumerate(events) if value in event]


# -- Anthropic Messages -------------------------------------------------------------------------


def messages_stream(blocks: list[tuple[str, list[str]]]) -> list[str]:
    """A Messages stream of `(kind, pieces)` blocks: `text` or `tool_use`."""

    def event(data: dict[str, Any]) -> str:
        return sse(data, data["type"])

    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x"}
    usage = {"input_tokens": 5, "output_tokens": 1}
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    events = [event({"type": "message_start", "message": start}), event({"type": "ping"})]
    for index, (kind, pieces) in enumerate(blocks):
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces]
        else:
            block = {"type": "tool_use", "id": f"toolu_{index}", "name": "Write", "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        events.append(
            event({"type": "content_block_start", "index": index, "content_block": block})
        )
        for delta in deltas:
            events.append(event({"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(event({"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": "tool_use", "stop_sequence": None}
    events.append(event({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 9}}))
    events.append(event({"type": "message_stop"}))
    return events


def test_messages_input_json_deltas_holding_a_split_value_are_joined() -> None:
    pieces = split(ARGUMENTS, '"/tmp/tr', "ial-3/w")
    events = messages_stream([("tool_use", pieces)])
    assert holding(events, WORKSPACE) == []

    joined = join_split_values("messages", events, [WORKSPACE])

    assert len(joined) == len(events) - 2
    (at,) = holding(joined, WORKSPACE)
    assert json.loads(joined[at].partition("data: ")[2])["delta"] == {
        "type": "input_json_delta",
        "partial_json": ARGUMENTS,
    }
    assert joined[at].startswith("event: content_block_delta\ndata: ")
    assert joined[at].endswith("\n\n")
    assert assembled("messages", joined) == assembled("messages", events)
    assert assembled("messages", joined)["message"]["tool_calls"][0]["arguments"]["file_path"] == (
        f"{WORKSPACE}/hello.txt"
    )


def test_messages_text_deltas_are_joined_and_other_blocks_are_left_alone() -> None:
    text = f"I wrote {WORKSPACE}/hello.txt for you."
    events = messages_stream(
        [("text", split(text, "/tmp/", "trial-")), ("tool_use", split('{"a": 1}', '{"a'))]
    )
    joined = join_split_values("messages", events, [WORKSPACE])
    assert len(joined) == len(events) - 2
    (at,) = holding(joined, WORKSPACE)
    assert json.loads(joined[at].partition("data: ")[2])["delta"]["text"] == text
    assert joined[-6:] == events[-6:]  # the tool block's events and the end, untouched
    assert assembled("messages", joined) == assembled("messages", events)


def test_a_value_with_characters_json_escapes_is_found_in_argument_pieces() -> None:
    workspace = 'C:\\Users\\me\\"trial" 3'
    arguments = json.dumps({"file_path": f"{workspace}\\a.txt"})
    assert workspace not in arguments  # the JSON text holds it escaped
    events = messages_stream([("tool_use", split(arguments, "Users", "me"))])
    joined = join_split_values("messages", events, [workspace])
    assert len(joined) == len(events) - 2
    assert assembled("messages", joined) == assembled("messages", events)


# -- OpenAI Responses ---------------------------------------------------------------------------


def responses_stream(items: list[tuple[str, list[str]]], *, final_output: bool) -> list[str]:
    """A Responses stream of `(kind, pieces)` items: `message`, `function_call` or
    `custom_tool_call`; with `final_output` the completed response lists the items too."""
    sequence: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        sequence.append({"type": kind, "sequence_number": len(sequence), **fields})

    response = {"id": "resp_1", "object": "response", "model": "gpt-x", "status": "in_progress"}
    emit("response.created", response={**response, "output": []})
    output = []
    for position, (kind, pieces) in enumerate(items):
        ids = {"item_id": f"item_{position}", "output_index": position}
        whole = "".join(pieces)
        if kind == "message":
            part = {"type": "output_text", "text": whole, "annotations": []}
            item = {
                "type": "message",
                "id": ids["item_id"],
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
            emit("response.output_item.added", item={**item, "content": []}, output_index=position)
            for piece in pieces:
                emit("response.output_text.delta", delta=piece, content_index=0, **ids)
            emit("response.output_text.done", text=whole, content_index=0, **ids)
        elif kind == "function_call":
            item = {
                "type": "function_call",
                "id": ids["item_id"],
                "call_id": f"call_{position}",
                "name": "write_file",
                "arguments": whole,
                "status": "completed",
            }
            emit(
                "response.output_item.added", item={**item, "arguments": ""}, output_index=position
            )
            for piece in pieces:
                emit("response.function_call_arguments.delta", delta=piece, **ids)
            emit("response.function_call_arguments.done", arguments=whole, **ids)
        else:
            item = {
                "type": "custom_tool_call",
                "id": ids["item_id"],
                "call_id": f"call_{position}",
                "name": "apply_patch",
                "input": whole,
                "status": "completed",
            }
            emit("response.output_item.added", item={**item, "input": ""}, output_index=position)
            for piece in pieces:
                emit("response.custom_tool_call_input.delta", delta=piece, **ids)
            emit("response.custom_tool_call_input.done", input=whole, **ids)
        emit("response.output_item.done", item=item, output_index=position)
        output.append(item)
    usage = {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}
    final = {
        **response,
        "status": "completed",
        "usage": usage,
        "output": output if final_output else [],
    }
    emit("response.completed", response=final)
    return [sse(data, data["type"]) for data in sequence]


PATCH = f"*** Begin Patch\n*** Add File: {WORKSPACE}/hello.txt\n+hi\n*** End Patch"


@pytest.mark.parametrize("final_output", [True, False], ids=["final-output", "deltas-only"])
@pytest.mark.parametrize(
    ("kind", "pieces"),
    [
        ("function_call", split(ARGUMENTS, "/tmp/tr", "ial-3/w")),
        ("custom_tool_call", split(PATCH, "/tmp/", "trial-3")),
        ("message", split(f"see {WORKSPACE}", "see /t", "mp/trial-3/")),
    ],
    ids=["function_call_arguments", "custom_tool_call_input", "output_text"],
)
def test_responses_deltas_are_joined_and_sequence_numbers_renumbered(
    kind: str, pieces: list[str], final_output: bool
) -> None:
    events = responses_stream(
        [(kind, pieces), ("message", ["Do", "ne"])], final_output=final_output
    )
    joined = join_split_values("responses", events, [WORKSPACE])

    assert len(joined) == len(events) - 2
    data = [json.loads(event.partition("data: ")[2]) for event in joined]
    assert [d["sequence_number"] for d in data] == list(range(len(joined)))
    deltas = [d["delta"] for d in data if d["type"].endswith(".delta")]
    assert deltas == ["".join(pieces), "Do", "ne"]  # the other item's deltas stay apart
    assert all(
        e.startswith(f"event: {d['type']}\ndata: ") for e, d in zip(joined, data, strict=True)
    )
    assert assembled("responses", joined) == assembled("responses", events)


# -- OpenAI Chat Completions --------------------------------------------------------------------


def chat_stream(content: list[str], arguments: list[str]) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "gpt-x",
                "choices": [choice],
            }
        )

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in content]
    if arguments:
        function = {"name": "write_file", "arguments": ""}
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "call_1", "type": "function", "function": function}
                    ]
                }
            )
        )
        events += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in arguments
        ]
    events.append(chunk({}, "tool_calls" if arguments else "stop"))
    usage = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    events.append(
        sse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "gpt-x",
                "choices": [],
                "usage": usage,
            }
        )
    )
    events.append(sse("[DONE]"))
    return events


def test_chat_content_and_tool_call_arguments_are_joined() -> None:
    content = split(f"Writing {WORKSPACE}/hello.txt", "/tmp/tri", "al-3")
    arguments = split(ARGUMENTS, "/tmp/tr", "ial-3/w")
    events = chat_stream(content, arguments)
    joined = join_split_values("chat", events, [WORKSPACE])

    assert len(joined) == len(events) - 6  # each run's first chunk takes the run's text
    assert len(holding(joined, WORKSPACE)) == 2
    first = json.loads(joined[0].partition("data: ")[2])["choices"][0]["delta"]
    assert first == {"role": "assistant", "content": "".join(content)}
    assert joined[-1] == "data: [DONE]\n\n"
    assert joined[-3:] == events[-3:]  # finish, usage and [DONE] untouched
    assert assembled("chat", joined) == assembled("chat", events)


def test_a_chat_delta_that_carries_more_than_its_text_is_kept_empty() -> None:
    events = chat_stream(split(f"at {WORKSPACE}", "at /tmp/"), [])
    last = json.loads(events[2].partition("data: ")[2])
    last["choices"][0]["finish_reason"] = "stop"  # the last piece comes with the finish
    events[2] = sse(last)
    del events[3]  # the separate finish chunk
    joined = join_split_values("chat", events, [WORKSPACE])
    assert len(joined) == len(events) - 1  # the middle piece goes, the last one stays
    kept = json.loads(joined[1].partition("data: ")[2])
    assert kept["choices"][0] == {"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}
    assert assembled("chat", joined) == assembled("chat", events)


# -- streams left alone ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "events"),
    [
        ("messages", messages_stream([("tool_use", split(ARGUMENTS, "/tmp/tr", "ial-3/w"))])),
        (
            "responses",
            responses_stream([("function_call", split(ARGUMENTS, "/tmp/tr"))], final_output=True),
        ),
        ("chat", chat_stream(split(f"at {WORKSPACE}", "/tmp/tr"), [])),
    ],
)
@pytest.mark.parametrize(
    "values",
    [["/somewhere/else"], [], [""], [WORKSPACE + "/nope"]],
    ids=["other", "none", "empty", "longer"],
)
def test_a_stream_without_a_split_value_comes_back_unchanged(
    api: Api, events: list[str], values: list[str]
) -> None:
    before = list(events)
    assert join_split_values(api, events, values) is events
    assert events == before


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_value_whole_in_one_delta_leaves_the_stream_unchanged(api: Api) -> None:
    pieces = split(ARGUMENTS, '"file_path": ', "hello")
    assert WORKSPACE in pieces[1]
    if api == "messages":
        events = messages_stream([("tool_use", pieces)])
    else:
        events = responses_stream([("function_call", pieces)], final_output=True)
    assert join_split_values(api, events, [WORKSPACE]) is events


def test_a_run_whose_every_piece_holds_a_value_whole_is_unchanged() -> None:
    events = messages_stream([("text", [f"{WORKSPACE} and ", f"again {WORKSPACE}"])])
    assert join_split_values("messages", events, [WORKSPACE]) is events


def test_events_that_are_not_json_are_passed_through() -> None:
    events = messages_stream([("text", split(f"at {WORKSPACE}", "/tmp/tr"))])
    events.insert(2, "event: ping\ndata: not json\n\n")
    events.insert(0, ": a comment\n\n")
    joined = join_split_values("messages", events, [WORKSPACE])
    assert joined[0] == ": a comment\n\n" and joined[3] == "event: ping\ndata: not json\n\n"
    assert len(holding(joined, WORKSPACE)) == 1
