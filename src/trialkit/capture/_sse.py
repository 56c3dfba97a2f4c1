"""Streamed answers: what each API's events add up to.

`ChatEvents`, `ResponsesEvents` and `MessagesEvents` take each event's parsed JSON (framed by
`trialkit.capture._events`) and build the answer the API would have sent unstreamed, as plain
JSON values, for `wire` to read. They check the type of everything they take, so no event,
however odd, makes them raise; an event of the wrong shape is noted (`odd`). Texts that come
in many deltas are kept in blocks (`TextParts`), so a long answer costs about its length.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# --- what the events of each API add up to ---------------------------------------------------


class TextParts:
    """Text that arrives as many small deltas, kept in blocks of joined pieces: a list of a
    million short strings costs some 60 bytes a piece, this about a byte a character."""

    __slots__ = ("_blocks", "_pieces")

    _BLOCK = 256

    def __init__(self, first: str = "") -> None:
        self._blocks: list[str] = []
        self._pieces: list[str] = [first] if first else []

    def append(self, piece: str) -> None:
        pieces = self._pieces
        pieces.append(piece)
        if len(pieces) >= self._BLOCK:
            self._blocks.append("".join(pieces))
            pieces.clear()

    def text(self) -> str:
        """All the text so far (kept as one block from then on: the blocks are freed)."""
        if not self._blocks:
            return "".join(self._pieces)
        whole = "".join([*self._blocks, *self._pieces])
        self._blocks, self._pieces = [whole], []
        return whole

    def __bool__(self) -> bool:
        return bool(self._blocks or self._pieces)


class Accumulator(ABC):
    """One API's stream so far; `handle` takes each event's JSON object."""

    def __init__(self) -> None:
        self.complete = False
        """The answer is whole: the stream's final event, or one that ends the answer before
        it, was seen (see each API)."""
        self.terminated = False
        """The stream's final event itself was seen (`[DONE]`, `response.completed` or
        `.incomplete`, `message_stop`): a stream the server ended without it was cut short."""
        self.odd: str | None = None
        """The first event that is not what the API streams (its JSON is of another shape)."""
        self.error: tuple[object, str] | None = None
        """The first error the stream reported: (its JSON, the event that carried it)."""
        self.final: dict[str, Any] | None = None
        """The whole answer, when the stream ends by sending it (Responses)."""

    @abstractmethod
    def handle(self, event: str, data: dict[str, Any]) -> None:
        """One event: its `event:` name and its data's JSON object."""

    @abstractmethod
    def answer(self) -> dict[str, Any]:
        """What the events said, shaped as the API's unstreamed answer."""

    def _report(self, error: object, event: str) -> None:
        if self.error is None:
            self.error = (error, event)

    def _odd(self, event: str, what: str, value: object, expected: str = "an object") -> None:
        if self.odd is None:
            self.odd = f"{event}: {what} is {_kind(value)}, not {expected}"


@dataclass(slots=True)
class _ChatCall:
    id: str | None = None
    name: str | None = None
    custom: bool = False
    parts: TextParts = field(default_factory=TextParts)


class ChatEvents(Accumulator):
    """Chat Completions chunks. Complete at `[DONE]`, or at a `finish_reason` (some servers
    send no `[DONE]`); the usage chunk that `stream_options.include_usage` adds comes after the
    finish reason, so a consumer that stops there has no usage."""

    def __init__(self) -> None:
        super().__init__()
        self.id: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.content = TextParts()
        self.refusal = TextParts()
        self.reasoning = TextParts()
        self.calls: dict[int, _ChatCall] = {}

    def handle(self, event: str, data: dict[str, Any]) -> None:
        if data.get("error") is not None or data.get("object") == "error":
            self._report(data, "an error chunk")
            return
        self.id = self.id or _text(data.get("id"))
        self.model = self.model or _text(data.get("model"))
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = data.get("choices")
        if not isinstance(choices, list):
            if choices is not None:
                self._odd("a chunk", "`choices`", choices, "a list")
            return
        for choice in choices:  # only the first choice is assembled (`n` > 1 is rare)
            if not isinstance(choice, dict):
                self._odd("a chunk", "a choice", choice)
                continue
            if choice.get("index") not in (0, None):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta)
            elif delta is not None:
                self._odd("a chunk", "a choice's `delta`", delta)
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish = finish
                self.complete = True

    def _delta(self, delta: dict[str, Any]) -> None:
        for name, parts in (("content", self.content), ("refusal", self.refusal)):
            piece = delta.get(name)
            if isinstance(piece, str):
                parts.append(piece)
        for name in ("reasoning_content", "reasoning"):  # servers that send both repeat it
            piece = delta.get(name)
            if isinstance(piece, str) and piece:
                self.reasoning.append(piece)
                break
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                self._call(call)
        legacy = delta.get("function_call")  # the functions API that tools replaced
        if isinstance(legacy, dict):
            self._call({"index": 0, "function": legacy})

    def _call(self, call: dict[str, Any]) -> None:
        call_id = _text(call.get("id"))
        index = call.get("index")
        if type(index) is not int:  # a server that sends whole calls without an index
            same = [i for i, known in self.calls.items() if call_id and known.id == call_id]
            if same:
                index = same[0]
            elif call_id is None and self.calls:
                index = max(self.calls)
            else:
                index = max(self.calls, default=-1) + 1
        assembled = self.calls.setdefault(index, _ChatCall())
        assembled.id = assembled.id or call_id
        body = call.get("function")
        if call.get("type") == "custom" or isinstance(call.get("custom"), dict):
            assembled.custom = True
            body = call.get("custom")
        if isinstance(body, dict):
            assembled.name = assembled.name or _text(body.get("name"))  # some repeat it
            piece = body.get("input" if assembled.custom else "arguments")
            if isinstance(piece, str):
                assembled.parts.append(piece)

    def answer(self) -> dict[str, Any]:
        calls = []
        for _, call in sorted(self.calls.items()):
            kind, name = ("custom", "input") if call.custom else ("function", "arguments")
            body = {"name": call.name or "", name: call.parts.text()}
            calls.append({"id": call.id, "type": kind, kind: body})
        message = {
            "role": "assistant",
            "content": self.content.text() or None,
            "refusal": self.refusal.text() or None,
            "tool_calls": calls or None,
            "reasoning_content": self.reasoning.text() or None,
        }
        choice = {"index": 0, "message": message, "finish_reason": self.finish}
        return {"id": self.id, "model": self.model, "choices": [choice], "usage": self.usage}


class _Part(NamedTuple):
    """What a Responses delta (or done) event adds to its output item."""

    name: str
    position: str | None
    """The event field saying which part of the item (several texts in one message)."""
    value: str
    """The event field holding the text."""
    creates: str | None
    """The type of item to start when the event comes before its item (None: drop it)."""


_PARTS = {
    "response.output_text.delta": _Part("text", "content_index", "delta", "message"),
    "response.output_text.done": _Part("text", "content_index", "text", "message"),
    "response.refusal.delta": _Part("refusal", "content_index", "delta", "message"),
    "response.refusal.done": _Part("refusal", "content_index", "refusal", "message"),
    "response.function_call_arguments.delta": _Part("arguments", None, "delta", None),
    "response.function_call_arguments.done": _Part("arguments", None, "arguments", None),
    "response.custom_tool_call_input.delta": _Part("input", None, "delta", None),
    "response.custom_tool_call_input.done": _Part("input", None, "input", None),
    "response.reasoning_summary_text.delta": _Part(
        "summary", "summary_index", "delta", "reasoning"
    ),
    "response.reasoning_summary_text.done": _Part("summary", "summary_index", "text", "reasoning"),
    "response.reasoning_text.delta": _Part("reasoning", "content_index", "delta", "reasoning"),
    "response.reasoning_text.done": _Part("reasoning", "content_index", "text", "reasoning"),
}
_STARTED = ("response.created", "response.in_progress", "response.queued")
_ENDED = ("response.completed", "response.incomplete", "response.failed")


@dataclass(slots=True)
class _Item:
    item: dict[str, Any]
    done: bool = False
    """`response.output_item.done` gave the whole item."""
    parts: dict[tuple[str, int], TextParts] = field(default_factory=dict)

    def built(self) -> dict[str, Any]:
        if self.done or not self.parts:
            return self.item
        item = dict(self.item)
        texts = {key: parts.text() for key, parts in sorted(self.parts.items())}
        kind = item["type"]
        if kind == "message":
            item["content"] = [
                {"type": "output_text", "text": text}
                if name == "text"
                else {"type": "refusal", "refusal": text}
                for (name, _), text in texts.items()
                if name in ("text", "refusal")
            ]
        elif kind == "reasoning":
            for name, key, part in (
                ("summary", "summary", "summary_text"),
                ("reasoning", "content", "reasoning_text"),
            ):
                found = [{"type": part, "text": t} for (n, _), t in texts.items() if n == name]
                if found:
                    item[key] = found
        elif kind == "function_call" and ("arguments", 0) in texts:
            item["arguments"] = texts["arguments", 0]
        elif kind == "custom_tool_call" and ("input", 0) in texts:
            item["input"] = texts["input", 0]
        return item


class ResponsesEvents(Accumulator):
    """Responses events. Complete at `response.completed` or `response.incomplete`; a
    `response.failed` is an error, not an end."""

    def __init__(self) -> None:
        super().__init__()
        self.started: dict[str, Any] = {}
        """The response as `response.created` (or a later progress event) showed it."""
        self.items: dict[int, _Item] = {}
        """Output items by `output_index`."""
        self._index_of: dict[str, int] = {}

    def handle(self, event: str, data: dict[str, Any]) -> None:
        kind = data.get("type")
        kind = kind if isinstance(kind, str) else event
        part = _PARTS.get(kind)
        if part is not None:
            self._part(part, kind, data)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(kind, data)
        elif kind in _ENDED:
            response = data.get("response")
            if isinstance(response, dict):
                self.final = response
            else:
                self._odd(kind, "`response`", response)
            if kind == "response.failed":
                self._report(response if isinstance(response, dict) else data, kind)
            else:
                self.complete = self.terminated = True
        elif kind == "error":
            self._report(data, kind)
        elif kind in _STARTED and isinstance(data.get("response"), dict):
            self.started = data["response"]

    def _index(self, data: dict[str, Any], item_id: object) -> int | None:
        index = data.get("output_index")
        if type(index) is int:
            return index
        return self._index_of.get(item_id) if isinstance(item_id, str) else None

    def _item(self, kind: str, data: dict[str, Any]) -> None:
        done = kind.endswith(".done")
        item = data.get("item")
        if not isinstance(item, dict):
            self._odd(kind, "`item`", item)
            return
        if not isinstance(item.get("type"), str):
            self._odd(kind, "`item.type`", item.get("type"), "a string")
            return
        index = self._index(data, item.get("id"))
        if index is None:
            index = max(self.items, default=-1) + 1
        slot = self.items.setdefault(index, _Item(item))
        slot.item = item
        slot.done = slot.done or done
        if isinstance(item.get("id"), str):
            self._index_of[item["id"]] = index

    def _part(self, part: _Part, kind: str, data: dict[str, Any]) -> None:
        done = kind.endswith(".done")
        value = data.get(part.value)
        index = self._index(data, data.get("item_id"))
        if not isinstance(value, str):
            self._odd(kind, f"`{part.value}`", value, "a string")
            return
        if index is None:
            return
        slot = self.items.get(index)
        if slot is None:
            if part.creates is None:
                return
            slot = self.items[index] = _Item({"type": part.creates})
        position = data.get(part.position) if part.position else 0
        key = (part.name, position if type(position) is int else 0)
        if done:
            slot.parts[key] = TextParts(value)
        else:
            slot.parts.setdefault(key, TextParts()).append(value)

    def answer(self) -> dict[str, Any]:
        """The final response with the output items streamed before it (when it came without
        them); before the end, only the id and model of the response that started."""
        base = self.final or {name: self.started.get(name) for name in ("id", "model")}
        return {**base, "output": [slot.built() for _, slot in sorted(self.items.items())]}


_BLOCK_DELTAS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "input_json_delta": ("tool_use", "partial_json"),
}
"""A Messages delta type: (the block type it extends, the field holding the piece)."""


@dataclass(slots=True)
class _Block:
    block: dict[str, Any]
    parts: TextParts = field(default_factory=TextParts)

    def built(self) -> dict[str, Any]:
        if not self.parts:
            return self.block
        block = dict(self.block)
        kind = block["type"]
        if kind == "tool_use":
            block["input"] = self.parts.text()  # JSON text, parsed when it is read
        else:
            start = block.get(kind)
            block[kind] = (start if isinstance(start, str) else "") + self.parts.text()
        return block


class MessagesEvents(Accumulator):
    """Anthropic Messages events. Complete at `message_stop`, or at a `message_delta` with a
    stop reason (LiteLLM closes the stream before `message_stop`)."""

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None
        self.blocks: dict[int, _Block] = {}

    def handle(self, event: str, data: dict[str, Any]) -> None:
        kind = data.get("type")
        kind = kind if isinstance(kind, str) else event
        if kind == "content_block_delta":
            self._delta(data)
        elif kind == "content_block_start":
            index, block = data.get("index"), data.get("content_block")
            if not isinstance(block, dict):
                self._odd(kind, "`content_block`", block)
            elif not isinstance(block.get("type"), str):
                self._odd(kind, "`content_block.type`", block.get("type"), "a string")
            elif type(index) is int:
                self.blocks[index] = _Block(block)
        elif kind == "message_start":
            message = data.get("message")
            if not isinstance(message, dict):
                self._odd(kind, "`message`", message)
                return
            self.message = message
            usage = message.get("usage")
            self.usage = dict(usage) if isinstance(usage, dict) else {}
        elif kind == "message_delta":
            delta = data.get("delta")
            stop = delta.get("stop_reason") if isinstance(delta, dict) else None
            if isinstance(stop, str) and stop:
                self.stop = stop
                self.complete = True
            usage = data.get("usage")  # cumulative: each count given replaces the one before
            if isinstance(usage, dict):
                self.usage.update((name, n) for name, n in usage.items() if n is not None)
        elif kind == "message_stop":
            self.complete = self.terminated = True
        elif kind == "error":
            self._report(data, kind)

    def _delta(self, data: dict[str, Any]) -> None:
        index, delta = data.get("index"), data.get("delta")
        if not isinstance(delta, dict):
            self._odd("content_block_delta", "`delta`", delta)
            return
        if type(index) is not int:
            return
        kind = delta.get("type")
        target = _BLOCK_DELTAS.get(kind) if isinstance(kind, str) else None
        piece = delta.get(target[1]) if target else None
        if target is None or not isinstance(piece, str):
            return
        block = self.blocks.get(index)
        if block is None:
            if target[0] == "tool_use":  # a call without its name and id cannot be kept
                return
            block = self.blocks[index] = _Block({"type": target[0]})
        if block.block["type"] == target[0]:
            block.parts.append(piece)

    def answer(self) -> dict[str, Any]:
        blocks = [block.built() for _, block in sorted(self.blocks.items())]
        return {**self.message, "content": blocks, "stop_reason": self.stop, "usage": self.usage}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _kind(value: object) -> str:
    """What a JSON value is, for a message: `a string 'nope'`, `missing or null`, `a list`."""
    if value is None:
        return "missing or null"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:39] + "…"
        return f"a string {shown!r}"
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list"}
    return names.get(type(value), "an object")
