"""The model APIs' wire formats: which HTTP requests are model calls, and what their answers say.

Pure functions over parsed JSON and raw stream bytes, for the capture hook: no I/O, no HTTP
client. Four APIs are known: OpenAI Chat Completions (`chat`), OpenAI Responses (`responses`),
Anthropic Messages (`messages`) and embeddings; servers that copy them (vLLM, llama.cpp,
LiteLLM, OpenRouter) are read the same way. Answers become trialkit's own `ModelResponse`,
normalised as the providers in `trialkit.models` normalise the SDKs' objects.

Reading an answer is lenient about what only counts (an odd usage count is 0) and strict about
what it is: a body without the API's main list, or a tool call without a name, raises
`WireError`. A stream never raises while it is fed, and what it assembled can always be read.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from trialkit.capture._errors import error_message, error_text
from trialkit.capture._events import EventDecoder
from trialkit.capture._sse import Accumulator, ChatEvents, MessagesEvents, ResponsesEvents
from trialkit.models._convert import NULL, TEXT, ListOf, Obj, Shape, parse_arguments, shape_problem
from trialkit.models.base import ModelResponse
from trialkit.transcript import Message, ToolCall, Usage

__all__ = [
    "VOLATILE",
    "VOLATILE_INPUT_ITEM",
    "VOLATILE_METADATA",
    "Api",
    "StreamAssembler",
    "WireError",
    "dump_response",
    "error_message",
    "error_text",
    "key_body",
    "model_of",
    "parse_json",
    "provider_of",
    "recognise",
    "usage_of",
    "wants_stream",
]

Api = Literal["chat", "responses", "messages", "embeddings"]


class WireError(ValueError):
    """A body or stream that is not what its API sends (the message says what)."""


# --- requests ------------------------------------------------------------------------------

_LAST_SEGMENT: Final[dict[str, Api]] = {
    "responses": "responses",
    "messages": "messages",
    "embeddings": "embeddings",
}


def recognise(method: str, path: str) -> Api | None:
    """Which model API a request is for, from its method and URL path, whatever the host or
    path prefix (`/run/abc/v1/messages`, `/openai/deployments/x/chat/completions`).

    Only the endpoints that make a model answer count: `GET`s, `/responses/{id}` and its
    `/cancel`, `/messages/count_tokens`, `/messages/batches`, `/chat/completions/{id}` and
    OpenAI Assistants' `/threads/{id}/messages` do not. A query left on the path is ignored.
    """
    if method.upper() != "POST":
        return None
    segments = [segment for segment in path.partition("?")[0].split("/") if segment]
    if segments[-2:] == ["chat", "completions"]:
        return "chat"
    if not segments or segments[-3:-2] == ["threads"]:
        return None
    return _LAST_SEGMENT.get(segments[-1])


def provider_of(api: Api) -> str:
    """The provider whose API it is: `anthropic` for Messages, `openai` for the others."""
    return "anthropic" if api == "messages" else "openai"


VOLATILE: Final = frozenset({"prompt_cache_key", "user", "safety_identifier", "client_metadata"})
"""Top-level body fields that change from run to run without changing the answer, so a
request's cassette key leaves them out: `prompt_cache_key` (Codex sends its session id),
`user` and `safety_identifier` (end-user ids, often per session), `client_metadata` (Codex:
per-run client details). `stream_options` is kept: it changes what the answer holds."""

VOLATILE_METADATA: Final = frozenset({"user_id"})
"""Fields of `metadata` left out of the key: Claude Code's `user_id` is a JSON string holding a
per-run `session_id`."""

VOLATILE_INPUT_ITEM: Final = frozenset({"id"})
"""Fields of each Responses `input` item left out of the key: item ids change every run (the
`call_id` pairing a call with its output is kept). An `item_reference` keeps its id: the id
is what it says."""


def key_body(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """The body without its volatile fields, for the cassette key.

    A new dict (`body` is not changed; values that lose nothing are shared, not copied).
    `metadata` goes when removing `user_id` leaves it empty.
    """
    key = {name: value for name, value in body.items() if name not in VOLATILE}
    metadata = key.get("metadata")
    if isinstance(metadata, dict) and not VOLATILE_METADATA.isdisjoint(metadata):
        kept = {name: value for name, value in metadata.items() if name not in VOLATILE_METADATA}
        if kept:
            key["metadata"] = kept
        else:
            del key["metadata"]
    items = key.get("input")
    if api == "responses" and isinstance(items, list):
        key["input"] = [_key_item(item) for item in items]
    return key


def _key_item(item: object) -> object:
    if not isinstance(item, dict) or item.get("type") == "item_reference":
        return item
    return {name: value for name, value in item.items() if name not in VOLATILE_INPUT_ITEM}


def model_of(body: dict[str, Any]) -> str | None:
    """The model the body asks for, when it names one."""
    return _text(body.get("model"))


def wants_stream(body: dict[str, Any]) -> bool:
    """Whether the body asks for a streamed (SSE) answer."""
    return body.get("stream") is True


# --- usage ---------------------------------------------------------------------------------

_OPENAI_USAGE: Final = {
    "chat": (
        "prompt_tokens",
        "completion_tokens",
        "prompt_tokens_details",
        "completion_tokens_details",
    ),
    "responses": ("input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"),
}


def usage_of(api: Api, usage: object) -> Usage:
    """An answer's `usage` object as trialkit's `Usage` (input includes cached tokens).

    Anthropic's `input_tokens` leaves out the cache (read and written), so both are added back.
    Missing fields and anything that is not a non-negative whole number (bools included) count
    0; this never raises.
    """
    if not isinstance(usage, dict):
        return Usage()
    if api == "messages":
        read = _count(usage.get("cache_read_input_tokens"))
        write = _count(usage.get("cache_creation_input_tokens"))
        return Usage(
            input_tokens=_count(usage.get("input_tokens")) + read + write,
            output_tokens=_count(usage.get("output_tokens")),
            cache_read_tokens=read,
            cache_write_tokens=write,
            reasoning_tokens=_count(_at(usage, "output_tokens_details", "thinking_tokens")),
        )
    if api == "embeddings":
        prompt = _count(usage.get("prompt_tokens"))
        return Usage(input_tokens=prompt or _count(usage.get("total_tokens")))
    inputs, outputs, input_details, output_details = _OPENAI_USAGE[api]
    return Usage(
        input_tokens=_count(usage.get(inputs)),
        output_tokens=_count(usage.get(outputs)),
        cache_read_tokens=_count(_at(usage, input_details, "cached_tokens")),
        cache_write_tokens=_count(_at(usage, input_details, "cache_write_tokens")),
        reasoning_tokens=_count(_at(usage, output_details, "reasoning_tokens")),
    )


# --- answers -------------------------------------------------------------------------------

FINISH_REASONS: Final[dict[str, str]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
"""OpenAI's `finish_reason`s as `ModelResponse.finish_reason` names them (the OpenAI provider
reads its answers with this module)."""
STOP_REASONS: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic's `stop_reason`s as `ModelResponse.finish_reason` names them (the Anthropic
provider names its SDK's answers with these too)."""

_ARGUMENTS: Final = (str, dict, NULL)
_CHAT_CALLS: Final = {
    "function": Obj({"function": Obj({"name": (str,), "arguments": _ARGUMENTS})}),
    "custom": Obj({"custom": Obj({"name": (str,), "input": TEXT})}),
}
_RESPONSES_ITEMS: Final = {
    "message": Obj({"content": ListOf(Obj({"type": (str,), "text": TEXT, "refusal": TEXT}))}),
    "reasoning": Obj(
        {
            "summary": ListOf(Obj({"text": TEXT}), nullable=True),
            "content": ListOf(Obj({"text": TEXT}), nullable=True),
        }
    ),
    "function_call": Obj({"call_id": TEXT, "name": (str,), "arguments": _ARGUMENTS}),
    "custom_tool_call": Obj({"call_id": TEXT, "name": (str,), "input": TEXT}),
}
_HOSTED_CALLS: Final = {
    "computer_call": "action",
    "local_shell_call": "action",
    "shell_call": "action",
    "apply_patch_call": "operation",
}
"""Responses items for built-in tools that the client runs: a tool call named by the type
without `_call`, its arguments the item's action (or operation)."""
_MESSAGES_BLOCKS: Final = {
    "text": Obj({"text": (str,)}),
    "thinking": Obj({"thinking": (str,)}),
    "tool_use": Obj({"id": (str,), "name": (str,), "input": (dict, str, NULL)}),
}
_SHAPES: Final[dict[Api, Shape]] = {
    "chat": Obj(
        {
            "choices": ListOf(
                Obj(
                    {
                        "message": Obj(
                            {
                                "content": (str, list, NULL),
                                "refusal": TEXT,
                                "tool_calls": ListOf(
                                    Obj({"id": TEXT, "type": TEXT}), nullable=True
                                ),
                                "function_call": Obj(
                                    {"name": (str,), "arguments": _ARGUMENTS}, nullable=True
                                ),
                            }
                        ),
                        "finish_reason": TEXT,
                    }
                ),
                non_empty=True,
            )
        }
    ),
    "responses": Obj({"output": ListOf(Obj({"type": (str,)}))}),
    "messages": Obj({"content": ListOf(Obj({"type": (str,)})), "stop_reason": TEXT}),
    "embeddings": Obj({"data": ListOf(Obj())}),
}
_NAMES: Final[dict[Api, str]] = {
    "chat": "an OpenAI chat completion",
    "responses": "an OpenAI response",
    "messages": "an Anthropic message",
    "embeddings": "an OpenAI embeddings list",
}


def parse_json(api: Api, data: object) -> ModelResponse:
    """A non-streamed 2xx answer's parsed JSON as a `ModelResponse`.

    The assistant message (text; tool calls with parsed arguments, `{"_raw": text}` when they
    do not parse; a freeform custom tool's input as `{"input": text}`), the normalised finish
    reason, usage, model, id and reasoning texts. Embeddings give an empty assistant message.
    Raises `WireError` when `data` is not an answer of that API.
    """
    _require(api, data, _SHAPES[api])
    assert isinstance(data, dict)  # _require checked it is an object
    if api == "chat":
        return _chat(data)
    if api == "responses":
        return _responses(data)
    if api == "messages":
        return _messages(data)
    return ModelResponse(
        message=Message(role="assistant"),
        usage=usage_of(api, data.get("usage")),
        model=_text(data.get("model")),
        id=_text(data.get("id")),
    )


def dump_response(response: ModelResponse) -> dict[str, Any]:
    """A response as compact JSON values, defaults left out (as a cassette stores it)."""
    return response.model_dump(mode="json", exclude_defaults=True)


def _require(api: Api, value: object, shape: Shape, where: str = "") -> None:
    problem = shape_problem(value, shape, where)
    if problem is not None:
        raise WireError(f"not {_NAMES[api]}: {problem}")


def _chat(data: dict[str, Any]) -> ModelResponse:
    choice = data["choices"][0]
    message = choice["message"]
    calls = [_chat_call(index, call) for index, call in enumerate(message.get("tool_calls") or [])]
    legacy = message.get("function_call")  # the functions API that tools replaced
    if legacy is not None and not calls:
        calls = [_chat_call(0, {"type": "function", "function": legacy})]
    reasoning = _text(message.get("reasoning_content")) or _text(message.get("reasoning"))
    finish = choice.get("finish_reason")
    return ModelResponse(
        message=Message(
            role="assistant",
            content=_chat_text(message.get("content")) or message.get("refusal") or "",
            tool_calls=calls,
        ),
        finish_reason=FINISH_REASONS.get(finish, finish) if finish else None,
        usage=usage_of("chat", data.get("usage")),
        model=_text(data.get("model")),
        id=_text(data.get("id")),
        reasoning=[reasoning] if reasoning else [],
    )


def _chat_call(index: int, call: dict[str, Any]) -> ToolCall:
    kind = "custom" if call.get("type") == "custom" else "function"
    _require("chat", call, _CHAT_CALLS[kind], f"choices[0].message.tool_calls[{index}]")
    inner = call[kind]
    if kind == "custom":
        arguments = {"input": inner.get("input")}
    else:
        arguments = _arguments(inner.get("arguments"))
    return ToolCall(id=call.get("id") or f"call_{index}", name=inner["name"], arguments=arguments)


def _chat_text(content: str | list[Any] | None) -> str:
    """Message content: a string, or (some servers) a list of parts whose text parts count."""
    if not isinstance(content, list):
        return content or ""
    texts = (
        part.get("text")
        for part in content
        if isinstance(part, dict) and part.get("type") == "text"
    )
    return "".join(text for text in texts if isinstance(text, str))


def _responses(data: dict[str, Any]) -> ModelResponse:
    text: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for index, item in enumerate(data["output"]):
        kind = item["type"]
        _require("responses", item, _RESPONSES_ITEMS.get(kind, Obj()), f"output[{index}]")
        if kind == "message":
            for part in item["content"]:
                if part["type"] == "output_text":
                    text.append(part.get("text") or "")
                elif part["type"] == "refusal":
                    refusal.append(part.get("refusal") or "")
        elif kind == "reasoning":
            summary = [part.get("text") for part in item.get("summary") or []]
            details = [part.get("text") for part in item.get("content") or []]
            reasoning.extend(piece for piece in summary or details if piece)
        elif kind in ("function_call", "custom_tool_call") or kind in _HOSTED_CALLS:
            calls.append(_responses_call(index, kind, item))
    return ModelResponse(
        message=Message(
            role="assistant", content="".join(text) or "".join(refusal), tool_calls=calls
        ),
        finish_reason=_responses_finish(data, bool(calls)),
        usage=usage_of("responses", data.get("usage")),
        model=_text(data.get("model")),
        id=_text(data.get("id")),
        reasoning=reasoning,
    )


def _responses_call(index: int, kind: str, item: dict[str, Any]) -> ToolCall:
    call_id = item.get("call_id") or _text(item.get("id")) or f"call_{index}"
    if kind == "function_call":
        return ToolCall(id=call_id, name=item["name"], arguments=_arguments(item.get("arguments")))
    if kind == "custom_tool_call":
        return ToolCall(id=call_id, name=item["name"], arguments={"input": item.get("input")})
    action = item.get(_HOSTED_CALLS[kind])
    return ToolCall(id=call_id, name=kind.removesuffix("_call"), arguments=_arguments(action))


_INCOMPLETE: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _responses_finish(data: dict[str, Any], has_calls: bool) -> str | None:
    status = data.get("status")
    if status == "completed":
        return "tool_calls" if has_calls else "stop"
    if status == "incomplete":
        reason = _text(_at(data, "incomplete_details", "reason"))
        return _INCOMPLETE.get(reason, reason) if reason else "incomplete"
    return _text(status)


def _messages(data: dict[str, Any]) -> ModelResponse:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(data["content"]):
        kind = block["type"]
        _require("messages", block, _MESSAGES_BLOCKS.get(kind, Obj()), f"content[{index}]")
        if kind == "text":
            text.append(block["text"])
        elif kind == "thinking":
            reasoning.append(block["thinking"])
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=block["id"], name=block["name"], arguments=_arguments(block.get("input"))
                )
            )
    stop = data.get("stop_reason")
    return ModelResponse(
        message=Message(role="assistant", content="".join(text), tool_calls=calls),
        finish_reason=STOP_REASONS.get(stop, stop) if stop else None,
        usage=usage_of("messages", data.get("usage")),
        model=_text(data.get("model")),
        id=_text(data.get("id")),
        reasoning=reasoning,
    )


# --- streams -------------------------------------------------------------------------------

_ACCUMULATORS: Final[dict[Api, type[Accumulator]]] = {
    "chat": ChatEvents,
    "responses": ResponsesEvents,
    "messages": MessagesEvents,
}


class StreamAssembler:
    """Reassembles a streamed (SSE) answer from its raw bytes, fed as they arrive.

    Chunk boundaries may fall anywhere, even inside a character. `feed` never raises: a data
    line that is not a JSON object is counted in `malformed`, and an event whose fields are
    odd adds what it can. Feed the decoded body (after any `content-encoding`).
    """

    def __init__(self, api: Api) -> None:
        """Raises `ValueError` for `embeddings`, which are never streamed."""
        if api == "embeddings":
            raise ValueError("embeddings answers are not streamed")
        self.api: Api = api
        self.events = 0
        """Data events parsed as JSON objects (`[DONE]` not included)."""
        self.malformed = 0
        """Data events that are not a JSON object (an empty one is neither)."""
        self.first_malformed: str | None = None
        """The start of the first such event's data."""
        self._decoder = EventDecoder()
        self._stream = _ACCUMULATORS[api]()

    def feed(self, chunk: bytes) -> None:
        for event, data in self._decoder.feed(chunk):
            text = data.strip()
            if text == "[DONE]":  # ends a chat stream (proxies add it to the others too)
                if self.api == "chat":
                    self._stream.complete = self._stream.terminated = True
                continue
            if not text:
                continue
            try:
                value = json.loads(data)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict):
                self.events += 1
                self._stream.handle(event, value)
            else:
                self.malformed += 1
                if self.first_malformed is None:
                    self.first_malformed = text[:60] + ("…" if len(text) > 60 else "")

    @property
    def complete(self) -> bool:
        """The stream's final event was seen. Chat: `[DONE]`, or a `finish_reason` (some
        servers send no `[DONE]`; the usage chunk of `stream_options.include_usage` may still be
        on its way). Responses: `response.completed` or `response.incomplete`. Messages:
        `message_stop`, or a `message_delta` with a stop reason (LiteLLM closes the stream
        before `message_stop`). A stream that reported an error is not complete by that."""
        return self._stream.complete

    @property
    def terminated(self) -> bool:
        """The stream's final event itself was seen: chat's `[DONE]`, Responses'
        `response.completed` or `response.incomplete`, Messages' `message_stop`. A stream the
        server ended without it was cut short, whatever came before."""
        return self._stream.terminated

    @property
    def not_utf8(self) -> bool:
        """Some of the stream's lines are not UTF-8."""
        return self._decoder.not_utf8 > 0

    @property
    def odd(self) -> str | None:
        """The first event whose JSON is not of the API's shape: which, and what is wrong."""
        return self._stream.odd

    @property
    def error(self) -> str | None:
        """The first error reported inside the stream: an Anthropic `error` event, a Responses
        `error` or `response.failed`, a chat chunk holding an `error`."""
        if self._stream.error is None:
            return None
        data, event = self._stream.error
        return error_message(data) or f"{event} without a message"

    def result(self) -> ModelResponse:
        """The answer assembled so far (also when the stream is not complete).

        A Responses stream that ended with the whole response is read from that response.
        Items and blocks that are not what their type says are left out, so this does not
        raise however the stream went.
        """
        final = self._stream.final
        if final is not None and final.get("output"):
            try:
                return parse_json(self.api, final)
            except WireError:
                pass  # read what the events said instead
        return parse_json(self.api, _readable(self.api, self._stream.answer()))


def _readable(api: Api, answer: dict[str, Any]) -> dict[str, Any]:
    if api == "responses":
        answer["output"] = [
            item
            for item in answer["output"]
            if shape_problem(item, _RESPONSES_ITEMS.get(item["type"], Obj())) is None
        ]
    elif api == "messages":
        answer["content"] = [
            block
            for block in answer["content"]
            if shape_problem(block, _MESSAGES_BLOCKS.get(block["type"], Obj())) is None
        ]
    return answer


# --- small readers ---------------------------------------------------------------------------


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def _at(value: object, *names: str) -> object:
    for name in names:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def _arguments(value: object) -> dict[str, Any]:
    """Tool-call arguments: an object as it is, a JSON string parsed (`{"_raw": text}` when it
    is not a JSON object), nothing as `{}`."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    if not isinstance(value, str):
        return {"_raw": value}
    try:
        return parse_arguments(value)
    except RecursionError:  # nested deeper than json can read
        return {"_raw": value}
