"""A `Reply` as the server-sent events each API streams when the request says `"stream": true`.

Every function returns the events in order, one `bytes` each (the server writes one HTTP chunk
per event, so a behaviour can stop or hold the stream between events). Text and tool
arguments are split into several deltas, as real providers do:

- Chat Completions: `data:` lines only: a role delta, content (or `tool_calls`) deltas, a
  chunk with `finish_reason`, a usage chunk with `choices: []` when
  `stream_options.include_usage` is set, then `data: [DONE]`.
- Anthropic Messages and OpenAI Responses: an `event:` line before each `data:` line; the
  `data` carries the same `type` (and for Responses a `sequence_number`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tests.fakes import provider_wire as wire

if TYPE_CHECKING:
    from tests.fakes.provider_server import Reply


def pieces(text: str, parts: int = 3) -> Iterator[str]:
    """`text` in up to `parts` consecutive non-empty pieces."""
    size = max(1, -(-len(text) // parts))
    return (text[start : start + size] for start in range(0, len(text), size))


def _sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {payload}\n\n".encode()


# --- Chat Completions ---------------------------------------------------------------------


def chat_events(reply: Reply, request: dict[str, Any], ident: str, created: int) -> list[bytes]:
    options = request.get("stream_options")
    with_usage = isinstance(options, dict) and options.get("include_usage") is True
    base = {
        "id": f"chatcmpl-fake-{ident}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": reply.model or request.get("model", "fake"),
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        extra = {"usage": None} if with_usage else {}
        return _sse({**base, "choices": [choice], **extra})

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    events += [chunk({"reasoning_content": part}) for part in pieces(reply.reasoning or "")]
    events += [chunk({"content": part}) for part in pieces(reply.text)]
    for index, call in enumerate(wire.chat_tool_calls(reply, ident)):
        function = call["function"]
        first = {"index": index, "id": call["id"], "type": "function"}
        first["function"] = {"name": function["name"], "arguments": ""}
        events.append(chunk({"tool_calls": [first]}))
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in pieces(function["arguments"])
        ]
    events.append(chunk({}, wire.chat_finish_reason(reply)))
    if with_usage:
        events.append(_sse({**base, "choices": [], "usage": wire.chat_usage(reply, request)}))
    events.append(_sse("[DONE]"))
    return events


# --- Anthropic Messages -------------------------------------------------------------------


def messages_events(reply: Reply, request: dict[str, Any], ident: str) -> list[bytes]:
    usage = wire.anthropic_usage(reply, request)
    message = wire.anthropic_message(reply, request, ident)
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    events = [_event({"type": "message_start", "message": start}), _event({"type": "ping"})]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block)
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    output = {"output_tokens": usage.get("output_tokens", 1)}
    events.append(_event({"type": "message_delta", "delta": delta, "usage": output}))
    events.append(_event({"type": "message_stop"}))
    return events


def _block_events(index: int, block: dict[str, Any]) -> list[bytes]:
    empty: dict[str, Any]
    if block["type"] == "thinking":
        empty = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": part} for part in pieces(block["thinking"])
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif block["type"] == "tool_use":
        empty = {**block, "input": {}}
        arguments = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in pieces(arguments)]
    else:
        empty = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in pieces(block["text"])]
    return [
        _event({"type": "content_block_start", "index": index, "content_block": empty}),
        *(_event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas),
        _event({"type": "content_block_stop", "index": index}),
    ]


def _event(data: dict[str, Any]) -> bytes:
    return _sse(data, event=data["type"])


# --- OpenAI Responses ---------------------------------------------------------------------


def responses_events(
    reply: Reply, request: dict[str, Any], ident: str, created: int
) -> list[bytes]:
    sequence: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        sequence.append({"type": kind, "sequence_number": len(sequence), **fields})

    snapshot = wire.response_object(reply, request, ident, created, in_progress=True)
    emit("response.created", response=snapshot)
    emit("response.in_progress", response=snapshot)
    for position, item in enumerate(wire.response_output(reply, ident)):
        _item_events(emit, position, item)
    emit("response.completed", response=wire.response_object(reply, request, ident, created))
    return [_sse(data, event=data["type"]) for data in sequence]


def _item_events(emit: Callable[..., None], position: int, item: dict[str, Any]) -> None:
    at = {"output_index": position}
    ids = {"item_id": item["id"], **at}
    if item["type"] == "message":
        emit(
            "response.output_item.added",
            item={**item, "status": "in_progress", "content": []},
            **at,
        )
        text = item["content"][0]["text"]
        part = {"content_index": 0, **ids}
        emit("response.content_part.added", part=wire.output_text_part(""), **part)
        for delta in pieces(text):
            emit("response.output_text.delta", delta=delta, logprobs=[], **part)
        emit("response.output_text.done", text=text, logprobs=[], **part)
        emit("response.content_part.done", part=item["content"][0], **part)
    elif item["type"] == "function_call":
        emit(
            "response.output_item.added",
            item={**item, "status": "in_progress", "arguments": ""},
            **at,
        )
        for delta in pieces(item["arguments"]):
            emit("response.function_call_arguments.delta", delta=delta, **ids)
        done = {"arguments": item["arguments"], "name": item["name"]}
        emit("response.function_call_arguments.done", **done, **ids)
    elif item["type"] == "custom_tool_call":
        emit(
            "response.output_item.added",
            item={**item, "status": "in_progress", "input": ""},
            **at,
        )
        for delta in pieces(item["input"]):
            emit("response.custom_tool_call_input.delta", delta=delta, **ids)
        emit("response.custom_tool_call_input.done", input=item["input"], **ids)
    else:
        emit("response.output_item.added", item={**item, "summary": []}, **at)
    emit("response.output_item.done", item=item, **at)


def parse_events(body: bytes) -> list[tuple[str | None, str]]:
    """The (event, data) pairs of a server-sent event stream, as a client reads them."""
    parsed = []
    for block in body.decode().replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            if name == "event":
                event = value.strip()
            elif name == "data":
                data.append(value.removeprefix(" "))
        if data:
            parsed.append((event, "\n".join(data)))
    return parsed
